/**
 * UTF-8 decoding of bodies. Bodies are bytes: a leading U+FEFF is data, not a byte-order
 * mark to drop, which TextDecoder does unless told `ignoreBOM` (and `Request.text()` /
 * `Response.text()` always do: read bytes and decode them here instead).
 */

/** Invalid UTF-8 becomes U+FFFD, as the engine's `read()` gives it. */
export const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** Throws (a TypeError) on invalid UTF-8. */
export const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
