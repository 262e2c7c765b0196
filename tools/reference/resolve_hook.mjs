// Node ESM resolve hook: babylon-mmd's ESM build imports relative modules without the ".js"
// extension, and so do its imports of "@babylonjs/core/..." subpaths (fine for bundlers, not for
// Node); retry such specifiers with ".js" / "/index.js".
export async function resolve(specifier, context, nextResolve) {
    try {
        return await nextResolve(specifier, context);
    } catch (err) {
        if (err?.code !== "ERR_MODULE_NOT_FOUND" && err?.code !== "ERR_UNSUPPORTED_DIR_IMPORT") throw err;
        if (specifier.startsWith("node:") || specifier.endsWith(".js")) throw err;
        for (const suffix of [".js", "/index.js"]) {
            try {
                return await nextResolve(specifier + suffix, context);
            } catch { /* next suffix */ }
        }
        throw err;
    }
}
