import { register } from "node:module";
register("./resolve_hook.mjs", import.meta.url);
