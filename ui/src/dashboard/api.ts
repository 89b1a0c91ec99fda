// The dashboard's door to the coordinator: its REST API with the key the coordinator
// gave (admin or owner), sent as `Authorization: Bearer …`. The key lives in
// sessionStorage only (gone when the tab closes). Types come from bindings.ts, generated
// from the coordinator's Rust types.
import type { AgentInfo, Job, JobOutput, PoolSummary, Report, ReportRow } from "./bindings";

export type { AgentInfo, Job, JobOutput, PoolSummary, Report, ReportRow };

const KEY = "lull.dashboard.key";
export const savedKey = () => sessionStorage.getItem(KEY);
export const saveKey = (k: string) => sessionStorage.setItem(KEY, k);
export const forgetKey = () => sessionStorage.removeItem(KEY);

/** A refused request: the HTTP status and the coordinator's message. */
export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

async function call(path: string, key = savedKey() ?? "", method = "GET"): Promise<Response> {
  // Relative to the page, so a coordinator behind a path prefix works too.
  const r = await fetch(path.replace(/^\//, ""), { method, headers: { Authorization: `Bearer ${key}` } });
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    try {
      msg = (await r.json()).error ?? msg;
    } catch {
      /* not JSON */
    }
    throw new ApiError(r.status, msg);
  }
  return r;
}

const json = async <T>(path: string, key?: string) => (await call(path, key)).json() as Promise<T>;

export const pool = (key?: string) => json<PoolSummary>("/api/v1/pool", key);
export const agents = () => json<AgentInfo[]>("/api/v1/agents");
/** What a job's guests wrote so far (a running job's arrives with its lease renewals). */
export const output = (id: number) => json<JobOutput>(`/api/v1/jobs/${id}/output`);
/** Cancels a job (its submitter or an admin); the job as it is afterwards. */
export const cancel = async (id: number) => (await call(`/api/v1/jobs/${id}/cancel`, undefined, "POST")).json() as Promise<Job>;
export const jobs = (state: string, limit = 200) => json<Job[]>(`/api/v1/jobs?limit=${limit}${state ? `&state=${encodeURIComponent(state)}` : ""}`);

export interface ReportQuery {
  by: "owner" | "machine";
  since: string;
  period: "day" | "week";
}
const reportPath = (q: ReportQuery, format: "json" | "csv") => `/api/v1/reports?by=${q.by}&since=${q.since}&period=${q.period}&format=${format}`;
export const report = (q: ReportQuery) => json<Report>(reportPath(q, "json"));
/** The CSV exactly as the API returns it for the same query. */
export const reportCsv = async (q: ReportQuery) => (await call(reportPath(q, "csv"))).text();
