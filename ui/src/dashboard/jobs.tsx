// The job list: newest first, filterable by state, with each job's owner (submitter),
// when it was submitted and finished, its machines, attempts, evictions and CPU time.
import { useState } from "preact/hooks";
import * as api from "./api";
import { Empty, JOB_STATES, Loading, Pill, jobState, useLoad } from "./common";
import { ago, duration, when } from "./format";

export function Jobs({ tick }: { tick: number }) {
  const [state, setState] = useState("");
  const load = useLoad(() => Promise.all([api.jobs(state), api.pool()]), [tick, state]);
  return (
    <>
      <div class="controls">
        <label>
          Show{" "}
          <select data-testid="job-state" value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
            <option value="">all jobs</option>
            {Object.entries(JOB_STATES).map(([k, v]) => (
              <option value={k}>{v.label.toLowerCase()} jobs</option>
            ))}
          </select>
        </label>
        <span class="muted">newest first, at most 200</span>
      </div>
      <Loading load={load}>
        {([jobs, pool]) =>
          jobs.length === 0 ? (
            <Empty>{state ? `No ${state} jobs.` : <>No jobs yet. Submit one with <code>lull submit -- COMMAND</code>.</>}</Empty>
          ) : (
            <section>
              <table data-testid="jobs">
                <thead>
                  <tr>
                    <th class="num">Job</th>
                    <th>Program</th>
                    <th>State</th>
                    <th>Submitted by</th>
                    <th>Submitted</th>
                    <th>Finished</th>
                    <th class="num">Machines</th>
                    <th class="num">Attempts</th>
                    <th class="num">Evictions</th>
                    <th class="num">CPU time</th>
                  </tr>
                </thead>
                <tbody>
                  {jobs.map((j) => {
                    const attempts = j.tasks.reduce((a, t) => a + t.attempts, 0);
                    const evictions = j.tasks.reduce((a, t) => a + t.evictions, 0);
                    const cpu = j.tasks.reduce((a, t) => a + (t.user_cpu_s ?? 0) + (t.sys_cpu_s ?? 0), 0);
                    return (
                      <tr data-job={j.id}>
                        <td class="num">#{j.id}</td>
                        <td title={[j.spec.command, ...j.spec.args].join(" ")}>{j.program}</td>
                        <td>
                          <Pill {...jobState(j.state)} />
                        </td>
                        <td>{j.submitter}</td>
                        <td title={when(j.created_ms)}>{ago(j.created_ms, pool.now_ms)}</td>
                        <td>{j.finished_ms === null ? <span class="muted">–</span> : when(j.finished_ms)}</td>
                        <td class="num">{j.machines}</td>
                        <td class="num" data-field="attempts">
                          {attempts}
                        </td>
                        <td class="num" data-field="evictions">
                          {evictions}
                        </td>
                        <td class="num">{cpu > 0 ? duration(cpu) : <span class="muted">–</span>}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </section>
          )
        }
      </Loading>
    </>
  );
}
