/**
 * pi-bindery's entry, in a folder of its own name: pi labels a locally
 * installed extension by the folder of its index file, so `pi install` of
 * this package's folder lists it as "pi-bindery" (it was "src"). The code
 * lives in src/.
 */
export { default } from "../../src/index.js";
