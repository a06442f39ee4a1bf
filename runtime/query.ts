import { ApiError } from "./errors";

/** An OpenAPI parameter object of the query. */
export interface QueryParameterObject {
  name: string;
  in: "query";
  description: string;
  schema: Record<string, unknown>;
}

/**
 * A query parameter a route reads, declared once: the route lists it (`ApiRoute.query`), the
 * OpenAPI document describes it from there, and the handler reads it with `read`, so the
 * document cannot name a parameter the handler ignores or leave out one it parses.
 */
export interface QueryParam<T> {
  readonly name: string;
  readonly openapi: QueryParameterObject;
  /** Whether the request gives it (any value). */
  given(url: URL): boolean;
  /** Its value: checked (400 `E_PARAM` saying what is allowed, given twice included), or the default when absent. */
  read(url: URL): T;
}

interface IntSpec {
  min: number;
  max: number;
  description: string;
}

/** An integer in [min, max]; `fallback` when absent (the document's `default`), else undefined. */
export function intQuery(name: string, spec: IntSpec & { fallback: number }): QueryParam<number>;
export function intQuery(name: string, spec: IntSpec): QueryParam<number | undefined>;
export function intQuery(name: string, { min, max, description, fallback }: IntSpec & { fallback?: number }): QueryParam<number | undefined> {
  const schema = { type: "integer", minimum: min, maximum: max, ...(fallback === undefined ? {} : { default: fallback }) };
  return {
    name,
    openapi: { name, in: "query", description, schema },
    given: (url) => url.searchParams.has(name),
    read: (url) => (url.searchParams.has(name) ? intParam(url, name, min, max) : fallback),
  };
}

/** Text, given once; the route checks what it means. `schema` when it is more than a string. */
export function textQuery(name: string, description: string, schema: Record<string, unknown> = { type: "string" }): QueryParam<string | undefined> {
  return {
    name,
    openapi: { name, in: "query", description, schema },
    given: (url) => url.searchParams.has(name),
    read: (url) => {
      const values = url.searchParams.getAll(name);
      if (values.length > 1) throw new ApiError(400, "E_PARAM", `Invalid ${name}: given ${values.length} times; use it once.`);
      return values[0];
    },
  };
}

/** A given integer query parameter in [min, max]. */
function intParam(url: URL, name: string, min: number, max: number): number {
  const values = url.searchParams.getAll(name);
  const text = values[0]!;
  if (values.length > 1 || !/^-?\d{1,16}$/.test(text)) {
    throw new ApiError(400, "E_PARAM", `Invalid ${name} ${JSON.stringify(values.length > 1 ? values : text)}: expected one integer from ${min} to ${max}.`);
  }
  const value = Number(text);
  if (value < min || value > max) throw new ApiError(400, "E_PARAM", `Invalid ${name} ${value}: use an integer from ${min} to ${max}.`);
  return value;
}
