// The JSON API carries bytes as the engine writes them into dead letters: one base64 (src/core/base64.ts).
export { fromBase64, toBase64 } from "../src/core/base64";
