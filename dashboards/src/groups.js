// Breaking arms down by config axes: a comparison, a mean or a colour must never pool
// runs that differ in an axis other than the pairing keys (a grid of seed x train.lr
// paired by seed has one group per arm and learning rate).

// Returns the value at a dotted key ("train.lr") of a config object, or null.
export function configValue(config, dotted) {
  let v = config;
  for (const part of String(dotted).split('.')) {
    if (v === null || typeof v !== 'object' || !(part in v)) return null;
    v = v[part];
  }
  return v === undefined ? null : v;
}

// Returns the dotted keys an arm's overrides set ({"aah": {"regime": "x"}} -> aah.regime).
export function armKeys(arms) {
  const out = new Set();
  const walk = (o, p) => {
    for (const [k, v] of Object.entries(o || {})) {
      const key = p ? `${p}.${k}` : k;
      if (v && typeof v === 'object' && !Array.isArray(v)) walk(v, key);
      else out.add(key);
    }
  };
  for (const overrides of Object.values(arms || {})) walk(overrides, '');
  return out;
}

// The axes to break arms down by, by default: every key the grid varies that is neither
// a pairing key nor set by the arms themselves.
export function unpairedAxes(varying, pairBy, arms) {
  const set = armKeys(arms);
  return (varying || []).filter((k) => !(pairBy || []).includes(k) && !set.has(k));
}

// Returns the label of a group: "b" or "b · train.lr=0.001 · model.layers=4".
export function groupLabel(arm, keys, values) {
  return [arm, ...keys.map((k, i) => `${k}=${valueText(values[i])}`)].join(' · ');
}

function valueText(v) {
  if (v === null || v === undefined) return '—';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

// SQL of the SQLite JSON path of a dotted key, quoted as a string literal:
// train.lr -> '$."train"."lr"' (the same paths the coordinator uses).
export function jsonPathSql(dotted) {
  const path = `$.${String(dotted).split('.').map((c) => `"${c}"`).join('.')}`;
  return `'${path.replaceAll("'", "''")}'`;
}

// A summary metric's mean ± SE per arm x `keys`, from the coordinator's results (arms per
// stratum, over every succeeded run, as `results` prints them): [{arm, values (of keys),
// n, mean, se}], or null when those arms are broken down by other keys or none reports
// `metric` (the caller then reads the groups by SQL).
export function groupsFromResults(results, keys, metric) {
  const by = results && Array.isArray(results.by) ? results.by : null;
  if (!by || by.length !== keys.length || !keys.every((k) => by.includes(k))) return null;
  const out = [];
  for (const a of results.arms || []) {
    const m = (a.metrics || {})[metric];
    if (!m || !m.n) continue;
    out.push({ arm: a.arm, values: keys.map((k) => (a.by && k in a.by ? a.by[k] : null)),
      n: m.n, mean: m.mean, se: m.se ?? null });
  }
  return out.length ? out : null;
}
