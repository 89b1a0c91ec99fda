// The job list: newest first, filterable by state, with each job's owner (submitter),
// when it was submitted and finished, its exit code or signal and why it failed, was
// lost, was cancelled or still waits, its machines, attempts, evictions and CPU time, and
// the scheduler's placement: where, by which algorithm and why (hover), and the predicted
// runtime beside the actual one. Each row opens its output (refreshed while the job runs,
// as its agent ships it with the lease renewals) and, for its submitter or an admin,
// cancels it.
import { useEffect, useState } from "preact/hooks";
import * as api from "./api";
import { Empty, JOB_STATES, Loading, Pill, jobState, useLoad } from "./common";
import { ago, duration, when } from "./format";

/** Why a job is as it is: how it ended, or why it waits. */
const why = (j: api.Job) => j.reason ?? (j.waiting ? `waiting: ${j.waiting.reason}` : "");

export function Jobs({ tick }: { tick: number }) {
  const [state, setState] = useState("");
  const [again, setAgain] = useState(0);
  const [open, setOpen] = useState<number | null>(null);
  const [note, setNote] = useState<{ bad: boolean; text: string } | null>(null);
  const load = useLoad(() => Promise.all([api.jobs(state), api.pool()]), [tick, state, again]);
  const cancel = async (j: api.Job) => {
    if (!confirm(`Cancel job #${j.id} (${j.program})? A running guest is stopped within 15 s.`)) return;
    try {
      const c = await api.cancel(j.id);
      setNote({ bad: false, text: c.state === "cancelled" ? `Job #${j.id} cancelled.` : `Job #${j.id} had already ended (${c.state}).` });
    } catch (e) {
      setNote({ bad: true, text: `Job #${j.id} was not cancelled: ${e instanceof api.ApiError ? e.message : e}` });
    }
    setAgain((n) => n + 1);
  };
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
      {note && (
        <p class={`banner ${note.bad ? "bad" : "ok"}`} data-testid="job-note">
          {note.text}
        </p>
      )}
      <Loading load={load}>
        {([jobs, pool]) =>
          jobs.length === 0 ? (
            <Empty>{state ? `No ${state} jobs.` : <>No jobs yet. Submit one with <code>lull submit -- COMMAND</code>.</>}</Empty>
          ) : (
            <section class="scroll">
              <table class="jobs" data-testid="jobs">
                <thead>
                  <tr>
                    <th class="num">Job</th>
                    <th>Program</th>
                    <th>State</th>
                    <th>Exit</th>
                    <th>Why</th>
                    <th>Submitted</th>
                    <th>Finished</th>
                    <th class="num">Machines</th>
                    <th class="num">Attempts</th>
                    <th class="num">Evictions</th>
                    <th class="num">CPU time</th>
                    <th>Placed on</th>
                    <th class="num">Runtime</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {jobs.map((j) => (
                    <>
                      <JobRow j={j} now={pool.now_ms} open={open === j.id} onOpen={() => setOpen(open === j.id ? null : j.id)} onCancel={() => cancel(j)} />
                      {open === j.id && (
                        <tr class="output-row">
                          <td colSpan={14}>
                            <JobOutputView id={j.id} />
                          </td>
                        </tr>
                      )}
                    </>
                  ))}
                </tbody>
              </table>
            </section>
          )
        }
      </Loading>
    </>
  );
}

function JobRow({ j, now, open, onOpen, onCancel }: { j: api.Job; now: number; open: boolean; onOpen: () => void; onCancel: () => void }) {
  const attempts = j.tasks.reduce((a, t) => a + t.attempts, 0);
  const evictions = j.tasks.reduce((a, t) => a + t.evictions, 0);
  const cpu = j.tasks.reduce((a, t) => a + (t.user_cpu_s ?? 0) + (t.sys_cpu_s ?? 0), 0);
  const reason = why(j);
  return (
    <tr data-job={j.id}>
      <td class="num">#{j.id}</td>
      <td title={[j.spec.command, ...j.spec.args].join(" ")}>{j.program}</td>
      <td>
        <Pill {...jobState(j.state)} />
      </td>
      <td data-field="exit" class={j.exit !== null && j.exit !== "0" ? "bad-text" : ""}>
        {j.exit ?? <span class="muted">–</span>}
      </td>
      <td data-field="why" class={j.waiting?.cannot_run ? "why bad-text" : "why"} title={reason}>
        {reason || <span class="muted">–</span>}
      </td>
      <td title={when(j.created_ms)}>
        {j.submitter}
        <br />
        <span class="muted">{ago(j.created_ms, now)}</span>
      </td>
      <td title={j.finished_ms === null ? "" : when(j.finished_ms)}>{j.finished_ms === null ? <span class="muted">–</span> : ago(j.finished_ms, now)}</td>
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
        </>
      ) : (
        <>
          <td data-field="placement" title={`${j.placement.algorithm}: ${j.placement.reason}`}>
            {j.placement.machines.join(", ")} <span class="muted">({j.placement.algorithm})</span>
          </td>
          <td class="num">
            <span data-field="actual">
              {j.placement.actual_runtime_s === null ? <span class="muted">{duration((now - j.placement.placed_ms) / 1000)} so far</span> : duration(j.placement.actual_runtime_s)}
            </span>
            <br />
            <span class="muted" data-field="predicted" title={`prediction from ${j.placement.prediction_source}`}>
              predicted {duration(j.placement.predicted_runtime_s)}
            </span>
          </td>
        </>
      )}
      <td class="actions">
        <button data-action="output" onClick={onOpen} disabled={j.state === "queued"} title={j.state === "queued" ? "nothing ran yet" : "what its guests wrote"}>
          {open ? "Hide" : "Output"}
        </button>
        {j.may_cancel && (
          <button data-action="cancel" class="danger" onClick={onCancel}>
            Cancel
          </button>
        )}
      </td>
    </tr>
  );
}

/** A job's output: each rank's standard output and error, fetched again every 2 s while
 * the job runs (its agent sends what is new with each lease renewal). */
function JobOutputView({ id }: { id: number }) {
  const [n, setN] = useState(0);
  const load = useLoad(() => api.output(id), [id, n]);
  const running = load.data?.state === "running" || load.data?.state === "queued";
  useEffect(() => {
    if (!running) return;
    const t = setTimeout(() => setN((x) => x + 1), 2000);
    return () => clearTimeout(t);
  }, [running, n]);
  return (
    <Loading load={load}>
      {(o) => (
        <div class="output" data-testid="job-output" data-state={o.state}>
          {o.tasks.map((t) => (
            <div>
              {o.tasks.length > 1 && (
                <h3>
                  Rank {t.rank} on {t.machine ?? "–"} ({t.state})
                </h3>
              )}
              {t.output === null ? (
                <p class="muted">{o.state === "running" ? "Nothing written yet (it arrives with the next renewal, within 15 s)." : "No output was kept."}</p>
              ) : (
                <>
                  <pre data-stream="stdout">{t.output.stdout}</pre>
                  {t.output.stderr && (
                    <pre data-stream="stderr" class="stderr">
                      {t.output.stderr}
                    </pre>
                  )}
                </>
              )}
              {t.reason && <p class="bad-text">{t.reason}</p>}
            </div>
          ))}
          <p class="muted">{running ? "Running: refreshed every 2 s." : `Job ${o.state}${o.reason ? `: ${o.reason}` : ""}.`}</p>
        </div>
      )}
    </Loading>
  );
}
