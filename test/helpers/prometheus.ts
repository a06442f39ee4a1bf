// The real parser of the Prometheus text format (prom2json's output shape); it ships no types.
// @ts-expect-error no declaration file
import parsePrometheusTextFormat from "parse-prometheus-text-format";

export interface PromSample {
  labels?: Record<string, string>;
  value?: string;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}
export interface PromFamily {
  name: string;
  help: string;
  type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
  metrics: PromSample[];
}

/**
 * Parses a scrape into its families, by name. The parser (1.1.1) folds every sample of a
 * histogram into one and drops its labels, `_sum` and `_count` when the histogram has labels:
 * those are read again from the same text parsed with the histograms as untyped series
 * (`_bucket`, `_sum`, `_count` each), grouped back by their labels.
 */
export function parseScrape(text: string): Map<string, PromFamily> {
  const families = new Map((parsePrometheusTextFormat(text) as PromFamily[]).map((f) => [f.name, f]));
  const histograms = [...families.values()].filter((f) => f.type === "HISTOGRAM");
  if (histograms.length === 0) return families;
  const untyped = parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped")) as PromFamily[];
  for (const family of histograms) {
    const groups = new Map<string, PromSample>();
    const group = (labels: Record<string, string> = {}) => {
      const key = JSON.stringify(
        Object.entries(labels)
          .filter(([k]) => k !== "le")
          .sort(),
      );
      let sample = groups.get(key);
      if (!sample) {
        const own = Object.fromEntries(Object.entries(labels).filter(([k]) => k !== "le"));
        groups.set(key, (sample = { ...(Object.keys(own).length > 0 ? { labels: own } : {}), buckets: {} }));
      }
      return sample;
    };
    for (const part of untyped) {
      for (const m of part.metrics) {
        if (part.name === `${family.name}_bucket`) group(m.labels).buckets![m.labels!.le!] = m.value!;
        else if (part.name === `${family.name}_sum`) group(m.labels).sum = m.value;
        else if (part.name === `${family.name}_count`) group(m.labels).count = m.value;
      }
    }
    family.metrics = [...groups.values()];
  }
  return families;
}

/** The value of the one sample of `name` whose labels include `labels`; undefined when none. */
export function valueOf(families: Map<string, PromFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const sample = families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return sample?.value === undefined ? undefined : Number(sample.value);
}

/** Checks a histogram sample: buckets never decrease and +Inf equals the count. Returns the count. */
export function checkHistogram(sample: PromSample): number {
  const buckets = Object.entries(sample.buckets ?? {}).map(([le, count]) => [le === "+Inf" ? Infinity : Number(le), Number(count)] as const);
  buckets.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < buckets.length; i++)
    if (buckets[i]![1] < buckets[i - 1]![1])
      throw new Error(`bucket le=${buckets[i]![0]} (${buckets[i]![1]}) below le=${buckets[i - 1]![0]} (${buckets[i - 1]![1]})`);
  const inf = buckets.at(-1);
  if (!inf || inf[0] !== Infinity) throw new Error("no +Inf bucket");
  if (inf[1] !== Number(sample.count)) throw new Error(`+Inf bucket ${inf[1]} != count ${sample.count}`);
  return inf[1];
}
