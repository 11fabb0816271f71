// Runs Grafana's own code (@grafana/data, @grafana/schema; Apache-2.0) for
// the Go tests of internal/testkit/grafana, one request per run:
//
//   {"panel": {"transformations": [...], "matchers": {"key": {id, options}}},
//    "frames": [{"refId", "name", "fields": [{"name", "type", "labels", "config", "values"}]}]}
//
// answers with the panel's frames after its transformations
// (transformDataFrame with the standard transformers), each field with its
// display name (getFieldDisplayName) and the keys of the panel's field
// matchers that select it (getFieldMatcher: its overrides', its xychart
// series' x and y):
//
//   {"frames": [{"refId", "name", "fields": [{..., "displayName", "matched": ["key"]}]}]}
//
// and to {"schema": true} with what @grafana/schema says of dashboards:
// the schemaVersion of its default dashboard and, by panel type, the names
// its generated Options types declare.
'use strict';

const fs = require('fs');
const path = require('path');
const data = require('@grafana/data');

// @grafana/data's transformDataFrame asks window whether a Grafana scene
// runs; set after the require, whose dependencies take a window for a
// browser with a document.
globalThis.window = {};

// The standard transformers, registered as Grafana's app registers them
// (public/app/features/transformers/standardTransformers.ts), each id once.
const byId = new Map();
for (const t of Object.values(data.standardTransformers)) {
  if (!byId.has(t.id)) {
    byId.set(t.id, t);
  }
}
data.standardTransformersRegistry.setInit(() =>
  [...byId.values()].map((t) => ({ id: t.id, aliasIds: t.aliasIds, name: t.name, transformation: () => Promise.resolve(t) }))
);

function transform(req) {
  const frames = req.frames.map((f) => data.toDataFrame(f));
  const ctx = { interpolate: (s) => s };
  return new Promise((resolve, reject) => {
    data.transformDataFrame(req.panel.transformations || [], frames, ctx).subscribe({ next: resolve, error: reject });
  });
}

function describe(out, matchers) {
  const compiled = Object.entries(matchers || {}).map(([key, m]) => [key, data.getFieldMatcher(m)]);
  return out.map((frame) => ({
    refId: frame.refId,
    name: frame.name,
    fields: frame.fields.map((field) => ({
      name: field.name,
      type: field.type,
      labels: field.labels,
      values: Array.from(field.values, (v) => (v === undefined ? null : v)),
      displayName: data.getFieldDisplayName(field, frame, out),
      matched: compiled.filter(([, m]) => m(field, frame, out)).map(([key]) => key),
    })),
  }));
}

// optionNames reads the names an exported interface declares in a
// generated .d.ts file (its own, at the top level of its body, and those
// of the interfaces it extends).
function optionNames(files, name) {
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const m = new RegExp(`export interface ${name.replace(/^.*\./, '')}(?: extends ([^{]+))? \\{`).exec(text);
    if (!m) {
      continue;
    }
    const own = [];
    let depth = 1;
    let line = '';
    for (let i = m.index + m[0].length; depth > 0 && i < text.length; i++) {
      const c = text[i];
      if (c === '{') depth++;
      if (c === '}') depth--;
      if (depth === 1 && (c === ';' || c === '\n')) {
        const prop = /^\s*(\w+)\??:/.exec(line);
        if (prop) own.push(prop[1]);
        line = '';
      } else if (depth === 1) {
        line += c;
      } else if (c === '{' && depth === 2) {
        const prop = /^\s*(\w+)\??:/.exec(line);
        if (prop) own.push(prop[1]);
        line = '';
      }
    }
    const inherited = (m[1] || '').split(',').map((s) => s.trim()).filter(Boolean).flatMap((parent) => optionNames(files, parent));
    return [...new Set([...own, ...inherited])];
  }
  throw new Error(`no interface ${name} in ${files.join(', ')}`);
}

function schema() {
  const schemaDir = path.dirname(require.resolve('@grafana/schema/package.json'));
  const types = path.join(schemaDir, 'dist', 'types');
  const common = path.join(types, 'common', 'common.gen.d.ts');
  const options = {};
  const composable = path.join(types, 'raw', 'composable');
  for (const panel of fs.readdirSync(composable)) {
    const file = path.join(composable, panel, 'panelcfg', 'x', 'types.gen.d.ts');
    if (fs.existsSync(file) && /export interface Options\b/.test(fs.readFileSync(file, 'utf8'))) {
      options[panel] = optionNames([file, common], 'Options');
    }
  }
  return { schemaVersion: require('@grafana/schema').defaultDashboard.schemaVersion, options };
}

async function main() {
  const req = JSON.parse(fs.readFileSync(0, 'utf8'));
  if (req.schema) {
    return schema();
  }
  return { frames: describe(await transform(req), req.panel.matchers) };
}

main().then(
  (res) => process.stdout.write(JSON.stringify(res)),
  (err) => {
    process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
    process.exitCode = 1;
  }
);
