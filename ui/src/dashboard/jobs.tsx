// The job list: newest first, filterable by state, with each job's owner (submitter),
// when it was submitted and finished, its machines, attempts, evictions and CPU time, and
// the scheduler's placement: where, by which algorithm and why (hover), and the predicted
// runtime beside the actual one.
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
                    <th>Placed on</th>
                    <th class="num">Predicted</th>
                    <th class="num">Actual</th>
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
                        {j.placement === null ? (
                          <>
                            <td class="muted">not yet</td>
                            <td class="num muted">–</td>
                            <td class="num muted">–</td>
                          </>
                        ) : (
                          <>
                            <td data-field="placement" title={`${j.placement.algorithm}: ${j.placement.reason}`}>
                              {j.placement.machines.join(", ")} <span class="muted">({j.placement.algorithm})</span>
                            </td>
                            <td class="num" data-field="predicted" title={`prediction from ${j.placement.prediction_source}`}>
                              {duration(j.placement.predicted_runtime_s)}
                            </td>
                            <td class="num" data-field="actual">
                              {j.placement.actual_runtime_s === null ? (
                                <span class="muted">{duration((pool.now_ms - j.placement.placed_ms) / 1000)} so far</span>
                              ) : (
                                duration(j.placement.actual_runtime_s)
                              )}
                            </td>
                          </>
                        )}
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
