import { createConfig, lintFromString } from "@redocly/openapi-core";
import { describe, expect, it } from "vitest";
import { startServer } from "./_server";

type OpenAPIDocument = { paths: Record<string, Record<string, { operationId?: string }>> };

/** The served document, with auth on (the `basic` scheme applied) or off. */
async function servedDocument(auth = false): Promise<OpenAPIDocument> {
  const s = await startServer(auth ? { auth: { users: [{ username: "u", password: "p" }] } } : {});
  const res = await s.get("/api/v1/openapi.json", auth ? { headers: { authorization: `Basic ${btoa("u:p")}` } } : undefined);
  expect(res.status).toBe(200);
  return (await res.json()) as OpenAPIDocument;
}

const OPERATIONS = ["get", "put", "post", "delete"];

describe("the OpenAPI document", () => {
  it.each([false, true])("passes redocly lint with its recommended rules (auth %s)", async (auth) => {
    const doc = await servedDocument(auth);
    const config = await createConfig({ extends: ["recommended"] });
    const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: "openapi.json", config });
    expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  });

  it("gives every operation of the route table its own operationId", async () => {
    const doc = await servedDocument();
    const ids = Object.values(doc.paths).flatMap((item) =>
      OPERATIONS.filter((method) => item[method]).map((method) => item[method]!.operationId),
    );
    expect(ids.length).toBeGreaterThan(20);
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
