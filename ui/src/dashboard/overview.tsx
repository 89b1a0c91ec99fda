// Pool overview: machines by state, jobs by state, the last 7 days' donated CPU time,
// and every machine with its state and why (the API's words: "owner active (CPU 99 %)"),
// today's interruptions against its limit and when it was last heard from.
import * as api from "./api";
import { CountBars, Empty, Loading, Pill, jobState, machineState, useLoad } from "./common";
import { ago, bytes, duration } from "./format";

export function Overview({ tick }: { tick: number }) {
  const load = useLoad(
    () => Promise.all([api.pool(), api.agents(), api.report({ by: "owner", since: "7d", period: "day" })]),
    [tick],
  );
  return (
    <Loading load={load}>
      {([pool, agents, week]) => {
        const m = (k: string) => pool.machines[k] ?? 0;
        const donatingNow = m("donating") + m("lingering") + m("lending_light");
        const cpu7 = week.rows.reduce((a, r) => a + r.cpu_s, 0);
        const offlineAfter = pool.offline_after_s;
        return (
          <>
            <div class="cards">
              <div class="card" data-testid="card-machines">
                <b>{pool.machines_total}</b> machines enrolled
                <span class="muted">
                  {donatingNow} donating now · {m("offline")} offline
                </span>
              </div>
              <div class="card" data-testid="card-jobs">
                <b>{(pool.jobs.queued ?? 0) + (pool.jobs.running ?? 0)}</b> jobs waiting or running
                <span class="muted">
                  {pool.jobs.queued ?? 0} queued · {pool.jobs.running ?? 0} running · {pool.jobs_total} in all
                </span>
              </div>
              <div class="card" data-testid="card-donated">
                <b>{duration(cpu7)}</b> CPU time donated
                <span class="muted">in the last 7 days, all machines{pool.viewer.owner ? ` of ${pool.viewer.owner}` : ""}</span>
              </div>
            </div>
            <div class="two">
              <section>
                <h2>Machines by state</h2>
                {pool.machines_total === 0 ? (
                  <Empty>
                    No machine has joined yet. Create a join token with <code>lull coordinator token create</code> and give it to
                    owners: they run <code>lull enrol --url {location.origin} --token TOKEN</code> (or paste it in the tray app's
                    Settings → Coordinator).
                  </Empty>
                ) : (
                  <CountBars counts={pool.machines} names={machineState} name="machines-by-state" />
                )}
                <p class="help">State as last reported; "offline" means no heartbeat for {offlineAfter} s.</p>
              </section>
              <section>
                <h2>Jobs by state</h2>
                {pool.jobs_total === 0 ? (
                  <Empty>
                    No jobs yet. Submit one with <code>lull submit -- COMMAND</code>.
                  </Empty>
                ) : (
                  <CountBars counts={pool.jobs} names={jobState} name="jobs-by-state" />
                )}
              </section>
            </div>
            {agents.length > 0 && (
            <section>
              <h2>Machines</h2>
              {(
                <table data-testid="machines">
                  <thead>
                    <tr>
                      <th>Machine</th>
                      <th>Owner</th>
                      <th>State</th>
                      <th>Interruptions today</th>
                      <th>Last heard</th>
                      <th class="num">Free memory for guests</th>
                    </tr>
                  </thead>
                  <tbody>
                    {agents.map((a) => {
                      const hb = a.heartbeat;
                      const silent = a.last_seen_ms === null || pool.now_ms - a.last_seen_ms > offlineAfter * 1000;
                      const st = a.last_seen_ms === null ? "never_seen" : silent ? "offline" : (hb?.state ?? "never_seen");
                      const limit = hb?.interruption_limit;
                      return (
                        <tr data-agent={a.id}>
                          <td>{a.machine}</td>
                          <td>{a.owner}</td>
                          <td>
                            <Pill {...machineState(st)} />
                            {a.why && st !== "never_seen" && st !== "offline" && (
                              <span class="muted why-line" data-field="why">
                                {a.why}
                              </span>
                            )}
                          </td>
                          <td>{hb ? limit != null ? <Meter used={limit - hb.budget_left} limit={limit} /> : `${hb.budget_left} left` : "—"}</td>
                          <td>{a.last_seen_ms === null ? "never" : ago(a.last_seen_ms, pool.now_ms)}</td>
                          <td class="num">{hb ? bytes(hb.free_mem_bytes) : "—"}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              )}
            </section>
            )}
          </>
        );
      }}
    </Loading>
  );
}

/** "2 of 5" with a small bar; red once the limit is reached (the machine left the pool for the day). */
export function Meter({ used, limit }: { used: number; limit: number }) {
  const full = limit === 0 || used >= limit;
  return (
    <span class={`meter${full ? " full" : ""}`} title={full ? "limit reached: no guest work on this machine until tomorrow" : ""}>
      <span class="track">
        <span style={{ width: `${limit ? Math.min(100, (used / limit) * 100) : 100}%` }} />
      </span>
      {used} of {limit}
    </span>
  );
}
