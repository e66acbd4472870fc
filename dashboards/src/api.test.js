// node --test: the API client's token handling and error mapping, against a fake fetch.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { get, post, query, setToken, restoreToken, sqlString, sqlInt } from './api.js';

const store = new Map();
globalThis.localStorage = {
  getItem: (k) => (store.has(k) ? store.get(k) : null),
  setItem: (k, v) => store.set(k, String(v)),
  removeItem: (k) => store.delete(k),
};

// A coordinator that wants "Bearer good" on every POST except /query, and on GET /closed.
let seen = [];
globalThis.fetch = async (url, init) => {
  seen.push({ url, init });
  const auth = init.headers.Authorization;
  let status = 200;
  let body = { ok: true };
  if (init.method === 'POST' && !url.endsWith('/query')) {
    if (!auth) [status, body] = [401, { error: 'write token required' }];
    else if (auth !== 'Bearer good') [status, body] = [403, { error: 'bad token' }];
  }
  if (url.endsWith('/query')) body = { columns: ['a', 'b'], rows: [[1, 'x'], [2, 'y']] };
  if (url.endsWith('/missing')) [status, body] = [404, { error: 'no such run 9' }];
  if (url.endsWith('/closed') && auth !== 'Bearer good') [status, body] = [401, { error: 'reads need a token' }];
  return { ok: status < 300, status, statusText: '', text: async () => JSON.stringify(body) };
};

beforeEach(() => {
  seen = [];
  setToken('');
});

test('a write without a token is refused with the message the UI shows', async () => {
  await assert.rejects(post('/runs/1/cancel'), { status: 401, message: 'refused: write token required' });
});

test('a wrong token is refused as such', async () => {
  setToken('bad');
  await assert.rejects(post('/runs/1/cancel'), { status: 403, message: /refused: token rejected \(bad token\)/ });
});

test('the pasted token goes in the Authorization header of writes and reads', async () => {
  setToken('good');
  assert.deepEqual(await post('/runs/1/retry'), { ok: true });
  await get('/status');
  await query('SELECT 1');
  assert.deepEqual(seen.map((s) => s.init.headers.Authorization), Array(3).fill('Bearer good'));
  setToken('');
  await get('/status');
  assert.equal(seen[3].init.headers.Authorization, undefined);
});

test('a read refused for want of a token says where to put it', async () => {
  await assert.rejects(get('/closed'), {
    status: 401, message: 'refused: this coordinator needs a token for reads (paste it in the token box above)',
  });
  setToken('wrong');
  await assert.rejects(get('/closed'), {
    status: 401, message: 'refused: the token is not valid for reads on this coordinator',
  });
});

test('the token is mirrored into the cookie the live stream carries, and cleared with it', () => {
  const cookies = [];
  globalThis.document = { set cookie(c) { cookies.push(c); } };
  try {
    setToken('a b;c');
    restoreToken();
    setToken('');
  } finally {
    delete globalThis.document;
  }
  assert.deepEqual(cookies, [
    'headlab_token=a%20b%3Bc; path=/; SameSite=Strict',
    'headlab_token=a%20b%3Bc; path=/; SameSite=Strict',
    'headlab_token=; path=/; SameSite=Strict; max-age=0',
  ]);
});

test('query returns row objects; errors carry the server message', async () => {
  assert.deepEqual(await query('SELECT a, b FROM t'), [{ a: 1, b: 'x' }, { a: 2, b: 'y' }]);
  await assert.rejects(get('/missing'), { status: 404, message: '404: no such run 9' });
});

test('SQL literals', () => {
  assert.equal(sqlString("it's"), "'it''s'");
  assert.equal(sqlInt('42'), 42);
  assert.throws(() => sqlInt('1; DROP TABLE runs'));
});
