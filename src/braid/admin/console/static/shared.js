// Everything the pages share from the helper modules, in one import.
export * from "./api.js";
export * from "./format.js";
