// Interruptions against limits: each machine's owner sets a daily interruption limit;
// once used up, the machine leaves the pool until the next day. Per day, the pool's
// interruptions (stacked by machine) against the sum of the limits, and a machine-by-day
// table of "used of limit".
import * as api from "./api";
import { PALETTE, StackedBars } from "./bars";
import { Empty, Loading, useLoad } from "./common";
import { keyName, periods } from "./donated";
import { dayLabel } from "./format";
import { Meter } from "./overview";

export function Interruptions({ tick }: { tick: number }) {
  const load = useLoad(() => Promise.all([api.report({ by: "machine", since: "7d", period: "day" }), api.agents()]), [tick]);
  return (
    <Loading load={load}>
      {([r, agents]) => {
        const owners = new Map(agents.map((a) => [a.id, a.owner]));
        const xs = periods(r);
        const keys = [...new Set([...agents.map((a) => a.id), ...r.rows.map((x) => x.key)])];
        const names = new Map(agents.map((a) => [a.id, `${a.machine} (${a.owner})`]));
        for (const x of r.rows) if (!names.has(x.key)) names.set(x.key, keyName(x, owners));
        const cell = new Map(r.rows.map((x) => [`${x.key}|${x.period}`, x]));
        const withAny = keys.filter((k) => r.rows.some((x) => x.key === k && x.interruptions > 0));
        // Days on which no machine reported its limit leave a gap rather than a "0" line.
        const limitPerDay = xs.map((p) => r.rows.filter((x) => x.period === p).reduce((a, x) => a + x.interruption_limit, 0) || null);
        if (agents.length === 0) return <Empty>No machines enrolled yet, so no interruptions.</Empty>;
        return (
          <>
            <p class="help intro">
              An <b>interruption</b> is an owner coming back while guest work was on their machine. Each owner allows at most a set number per day; at
              the limit, their machine leaves the pool until the next day.
            </p>
            <section>
              <h2>Interruptions per day, against the limits</h2>
              {withAny.length === 0 && <p class="muted">No interruptions in the last 7 days{limitPerDay.some((l) => l) ? "; the dashed line shows the limits allowed" : ""}.</p>}
              <StackedBars
                name="interruptions"
                labels={xs.map(dayLabel)}
                unit="interruptions"
                whole
                series={withAny.map((k, i) => ({ label: names.get(k) ?? k, colour: PALETTE[i % PALETTE.length], values: xs.map((p) => cell.get(`${k}|${p}`)?.interruptions ?? 0) }))}
                line={{ label: "interruptions allowed (sum of the daily limits the machines reported)", colour: "#d43a3a", values: limitPerDay }}
              />
            </section>
            <section>
              <h2>Per machine: interruptions used of the daily limit</h2>
              <div class="scroll">
                <table data-testid="interruptions">
                  <thead>
                    <tr>
                      <th>Machine (owner)</th>
                      {xs.map((p) => (
                        <th class="num">{dayLabel(p)}</th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {keys.map((k) => (
                      <tr data-key={k}>
                        <td>{names.get(k)}</td>
                        {xs.map((p) => {
                          const c = cell.get(`${k}|${p}`);
                          return (
                            <td class="num" data-period={p} data-value={c ? `${c.interruptions}/${c.interruption_limit}` : ""}>
                              {!c ? <span class="muted">–</span> : c.interruption_limit > 0 ? <Meter used={c.interruptions} limit={c.interruption_limit} /> : <span title="limit not reported that day">{c.interruptions}</span>}
                            </td>
                          );
                        })}
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <p class="help">– : the machine reported nothing that day (off, or not yet enrolled). A bare number: the machine's limit was not reported that day.</p>
            </section>
          </>
        );
      }}
    </Loading>
  );
}
