// Config diff of two runs: both configs flattened to dotted keys ("train.lr"), then the keys
// whose values differ (the dashboard's form of `headlab diff`, cli/diff.cc).

// Returns {"a.b": v} for every leaf of `obj` (arrays are leaves: a list is one value).
export function flatten(obj) {
  const flat = {};
  const walk = (o, p) => {
    for (const [k, v] of Object.entries(o || {})) {
      const key = p ? `${p}.${k}` : k;
      if (v && typeof v === 'object' && !Array.isArray(v)) walk(v, key);
      else flat[key] = v;
    }
  };
  walk(obj, '');
  return flat;
}

// Returns [{key, a, b}] for the keys of objects `a` and `b` (flattened) whose values differ,
// sorted by key; a key missing on one side has undefined there.
export function diffObjects(a, b) {
  const fa = flatten(a);
  const fb = flatten(b);
  const keys = [...new Set([...Object.keys(fa), ...Object.keys(fb)])].sort();
  return keys.filter((k) => JSON.stringify(fa[k]) !== JSON.stringify(fb[k]))
    .map((k) => ({ key: k, a: fa[k], b: fb[k] }));
}
