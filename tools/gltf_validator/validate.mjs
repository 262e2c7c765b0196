// Run the Khronos glTF-Validator on .glb/.gltf files: node validate.mjs FILE...
// Prints one JSON line per file: {path, errors, warnings, infos, hints, messages: [...]}
// (messages: up to 50 issues of severity error or warning: code, severity 0/1, pointer, message).
// Exit status: 0 when no file has errors, 1 when one has, 2 when a file could not be validated.
// Set up once with: npm ci --prefix tools/gltf_validator
import fs from "node:fs";
import path from "node:path";
import validator from "gltf-validator";

async function validate(file) {
  const full = path.resolve(file);
  const bytes = new Uint8Array(fs.readFileSync(full));
  const report = await validator.validateBytes(bytes, {
    uri: path.basename(full),
    maxIssues: 0,
    externalResourceFunction: (uri) =>
      fs.promises.readFile(path.resolve(path.dirname(full), decodeURIComponent(uri))).then((b) => new Uint8Array(b)),
  });
  const issues = report.issues;
  const messages = issues.messages
    .filter((m) => m.severity <= 1)
    .slice(0, 50)
    .map((m) => ({ code: m.code, severity: m.severity, pointer: m.pointer || "", message: m.message }));
  return { path: file, validator: report.validatorVersion, errors: issues.numErrors, warnings: issues.numWarnings,
           infos: issues.numInfos, hints: issues.numHints, messages };
}

let status = 0;
for (const file of process.argv.slice(2)) {
  try {
    const r = await validate(file);
    if (r.errors > 0) status = Math.max(status, 1);
    console.log(JSON.stringify(r));
  } catch (e) {
    console.log(JSON.stringify({ path: file, failure: String(e) }));
    status = 2;
  }
}
process.exit(status);
