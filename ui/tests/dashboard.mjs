// Drives the coordinator dashboard in Debian's Chromium (playwright-core, headless)
// against a running coordinator with real data, and checks it against the API itself:
// every page loads without a script error, the uPlot charts are drawn (a canvas of
// non-zero size with bar-coloured pixels), the tables show the API's figures, and
// "Export CSV" downloads byte for byte what the API's CSV report returns for the same
// query. Saves a screenshot of each page into $LULL_ARTIFACTS.
//
// Run by tests/tests/dashboard.rs; by hand:
//   LULL_URL=http://127.0.0.1:7878 LULL_ADMIN_KEY=… LULL_OWNER_KEY=… LULL_OWNER=alice \
//   LULL_ARTIFACTS=/tmp/shots node ui/tests/dashboard.mjs
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import assert from "node:assert/strict";

const url = process.env.LULL_URL;
const admin = process.env.LULL_ADMIN_KEY;
const ownerKey = process.env.LULL_OWNER_KEY;
const owner = process.env.LULL_OWNER;
const out = process.env.LULL_ARTIFACTS ?? "dashboard-artifacts";
const exe = process.env.LULL_CHROMIUM ?? "/usr/bin/chromium";
assert.ok(url && admin && ownerKey && owner, "LULL_URL, LULL_ADMIN_KEY, LULL_OWNER_KEY and LULL_OWNER are required");
mkdirSync(out, { recursive: true });

const get = async (path, key = admin) => {
  const r = await fetch(url + path, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(r.status, 200, `GET ${path}`);
  return r;
};
const getJson = async (path, key) => (await get(path, key)).json();

// The dashboard's way of writing figures (ui/src/dashboard/format.ts), written again
// here so a change on either side shows.
const duration = (s) => (s < 60 ? `${s.toFixed(1)} s` : s < 3600 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(2)} h`);

const browser = await chromium.launch({ executablePath: exe, headless: true, args: ["--no-sandbox"] });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true, locale: "en-GB" });
const page = await context.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
page.on("console", (m) => m.type() === "error" && !/401|403/.test(m.text()) && errors.push(`console: ${m.text()}`));
const shot = (name) => page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
const step = (s) => console.log(`dashboard: ${s}`);

/** The chart named `name` is drawn: a canvas of non-zero size with pixels of `rgb` on it. */
async function chartDrawn(name, rgb) {
  const loc = page.locator(`[data-chart="${name}"] canvas`);
  await loc.first().waitFor();
  const r = await loc.first().evaluate((c, rgb) => {
    const ctx = c.getContext("2d");
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let hits = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - rgb[0]) < 4 && Math.abs(d[i + 1] - rgb[1]) < 4 && Math.abs(d[i + 2] - rgb[2]) < 4 && d[i + 3] > 200) hits++;
    return { w: c.width, h: c.height, hits };
  }, rgb);
  assert.ok(r.w > 100 && r.h > 100, `${name} chart has a size: ${JSON.stringify(r)}`);
  assert.ok(r.hits > 50, `${name} chart has bars drawn in rgb(${rgb}): ${JSON.stringify(r)}`);
  return r;
}

// 1. The key prompt: a wrong key is refused in words, the admin key opens the pool.
await page.goto(url + "/");
await page.locator("#key").waitFor();
await shot("0-login");
await page.click("button[type=submit]");
await page.locator(".err", { hasText: "Paste a key first" }).waitFor();
await page.fill("#key", "lull_admin_" + "0".repeat(64));
await page.click("button[type=submit]");
await page.locator(".err", { hasText: "not known" }).waitFor();
await page.fill("#key", admin);
await page.click("button[type=submit]");
await page.locator('[data-testid="machines-by-state"]').waitFor();
step("signed in with the admin key");

// 2. Overview: machines and jobs by state as the API counts them; every machine listed.
const pool = await getJson("/api/v1/pool");
const agents = await getJson("/api/v1/agents");
for (const [which, counts] of [["machines-by-state", pool.machines], ["jobs-by-state", pool.jobs]]) {
  const shown = await page.$$eval(`[data-testid="${which}"] tr`, (rows) => Object.fromEntries(rows.map((r) => [r.dataset.state, Number(r.querySelector("td.num").textContent)])));
  assert.deepEqual(shown, Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0)), `${which} shows the API's counts`);
}
assert.equal(await page.locator('[data-testid="machines"] tbody tr').count(), agents.length, "one row per machine");
assert.match(await page.locator('[data-testid="card-machines"]').innerText(), new RegExp(`^${pool.machines_total}\\s+machines enrolled`));
await shot("1-overview");
step(`overview: ${JSON.stringify(pool.machines)} / ${JSON.stringify(pool.jobs)}`);

// 3. Donated time per owner per day: chart, tables and the CSV export.
async function checkDonated(q) {
  const r = await getJson(`/api/v1/reports?by=${q.by}&since=${q.since}&period=${q.period}&format=json`);
  assert.ok(r.rows.length > 0, "the report has rows");
  await page.locator('[data-testid="report-rows"]').waitFor();
  await chartDrawn("donated", [31, 157, 85]);
  const rows = await page.$$eval('[data-testid="report-rows"] tbody tr', (trs) =>
    trs.map((tr) => ({ key: tr.dataset.key, period: tr.dataset.period, ...Object.fromEntries([...tr.querySelectorAll("td[data-field]")].map((td) => [td.dataset.field, td.textContent.trim()])) })),
  );
  assert.equal(rows.length, r.rows.length, "one table row per report row");
  for (const x of r.rows) {
    const shown = rows.find((s) => s.key === x.key && s.period === x.period);
    assert.ok(shown, `a table row for ${x.key} on ${x.period}`);
    assert.equal(shown.cpu_s, duration(x.cpu_s), `CPU time of ${x.key} on ${x.period}`);
    assert.equal(shown.wall_s, duration(x.wall_s));
    assert.equal(shown.interruptions, `${x.interruptions}${x.interruption_limit > 0 ? ` of ${x.interruption_limit}` : ""}`);
    assert.equal(shown.jobs_completed, String(x.jobs_completed));
    assert.equal(shown.evictions, String(x.evictions));
    assert.equal(shown.available_fraction, `${(x.available_fraction * 100).toFixed(1)} %`);
  }
  // The per-period table holds each row's exact figure.
  for (const x of r.rows) {
    const v = await page.locator(`[data-testid="pivot"] tr[data-key="${x.key}"] td[data-period="${x.period}"]`).getAttribute("data-value");
    assert.equal(Number(v), x.cpu_s, `pivot cell ${x.key} ${x.period}`);
  }
  const [dl] = await Promise.all([page.waitForEvent("download"), page.click('[data-testid="export-csv"]')]);
  const file = readFileSync(await dl.path());
  const apiCsv = Buffer.from(await (await get(`/api/v1/reports?by=${q.by}&since=${q.since}&period=${q.period}&format=csv`)).arrayBuffer());
  assert.ok(file.equals(apiCsv), `the exported CSV equals the API's byte for byte:\n${file}\n---\n${apiCsv}`);
  assert.equal(file.toString().split("\n").filter(Boolean).length, r.rows.length + 1, "header + one line per row");
  step(`donated by ${q.by}/${q.period}/${q.since}: ${r.rows.length} rows, CSV ${file.length} bytes identical (${dl.suggestedFilename()})`);
}
await page.click('a[data-page="donated"]');
await checkDonated({ by: "owner", since: "7d", period: "day" });
await shot("2-donated-by-owner");
await page.selectOption('[data-testid="by"]', "machine");
await page.locator('[data-testid="report-rows"] tr[data-key]').first().waitFor();
await page.waitForFunction(() => document.querySelector('[data-testid="pivot"] th')?.textContent?.startsWith("Machine"));
await checkDonated({ by: "machine", since: "7d", period: "day" });
await shot("3-donated-by-machine");
await page.selectOption('[data-testid="period"]', "week");
await page.selectOption('[data-testid="since"]', "14d");
await page.waitForFunction(() => document.querySelector('[data-testid="report-rows"] th:nth-child(2)')?.textContent === "Week of");
await checkDonated({ by: "machine", since: "14d", period: "week" });

// 4. Interruptions against limits: the chart, and "used of limit" per machine and day.
// The API first: the real agent's first flush may add today's row at any moment, and a
// row the page loaded later than the API's answer is only ever a superset.
const ir = await getJson("/api/v1/reports?by=machine&since=7d&period=day");
await page.click('a[data-page="interruptions"]');
await page.locator('[data-testid="interruptions"]').waitFor();
await chartDrawn("interruptions", [31, 157, 85]);
for (const x of ir.rows) {
  const v = await page.locator(`[data-testid="interruptions"] tr[data-key="${x.key}"] td[data-period="${x.period}"]`).getAttribute("data-value");
  assert.equal(v, `${x.interruptions}/${x.interruption_limit}`, `interruptions of ${x.key} on ${x.period}`);
}
assert.ok(ir.rows.some((x) => x.interruption_limit > 0 && x.interruptions >= x.interruption_limit), "the data has a machine at its limit");
assert.ok((await page.locator('[data-testid="interruptions"] .meter.full').count()) > 0, "a machine at its limit is marked");
await shot("4-interruptions");
step(`interruptions: ${ir.rows.length} machine-days checked`);

// 5. Jobs: the API's list, with states, exit codes, reasons, attempts and who may cancel.
await page.click('a[data-page="jobs"]');
await page.locator('[data-testid="jobs"]').waitFor();
/** The job rows as shown, and as the API's JSON says they should be. */
const jobRows = () =>
  page.$$eval('[data-testid="jobs"] tbody tr[data-job]', (trs) =>
    trs.map((tr) => ({
      id: Number(tr.dataset.job),
      state: tr.querySelector(".pill").textContent.trim().toLowerCase(),
      exit: tr.querySelector('[data-field="exit"]').textContent.trim(),
      why: tr.querySelector('[data-field="why"]').textContent.trim(),
      attempts: Number(tr.querySelector('[data-field="attempts"]').textContent),
      placed: tr.querySelector('[data-field="placement"]')?.textContent.trim() ?? null,
      cancel: tr.querySelector('[data-action="cancel"]') !== null,
    })),
  );
const label = { queued: "queued", running: "running", completed: "completed", failed: "failed", cancelled: "cancelled", lost: "lost (retries used up)" };
const asShown = (j) => ({
  id: j.id,
  state: label[j.state],
  exit: j.exit ?? "–",
  why: j.reason ?? (j.waiting ? `waiting: ${j.waiting.reason}` : "–"),
  attempts: j.tasks.reduce((a, t) => a + t.attempts, 0),
  placed: j.placement ? `${j.placement.machines.join(", ")} (${j.placement.algorithm})` : null,
  cancel: j.may_cancel,
});
const jobs = await getJson("/api/v1/jobs?limit=200");
assert.deepEqual(await jobRows(), jobs.map(asShown), "the job list is the API's: exit codes, reasons, placements, cancels");
assert.ok(jobs.some((j) => j.placement), "some job was placed by the scheduler");
for (const [why, state] of [["program not found: nosuch-tool", "failed"], ["exit code 2", "failed"], ["needs 9 machines, the pool has 5", "queued"]]) {
  assert.ok(jobs.some((j) => j.state === state && (j.reason ?? j.waiting?.reason) === why), `a ${state} job says "${why}"`);
}
// The running job's output, as its agent shipped it with its renewals.
const runningJob = Number(process.env.LULL_RUNNING_JOB);
await page.click(`tr[data-job="${runningJob}"] [data-action="output"]`);
await page.locator('[data-testid="job-output"] pre[data-stream="stdout"]', { hasText: "step 2" }).waitFor();
assert.equal(await page.locator('[data-testid="job-output"]').getAttribute("data-state"), "running");
assert.match(await page.locator('[data-testid="job-output"] pre[data-stream="stderr"]').innerText(), /warming up/);
await shot("5b-job-output");
await page.click(`tr[data-job="${runningJob}"] [data-action="output"]`);
await shot("5-jobs");
// Cancel the job the pool cannot run, from its row.
const wideJob = Number(process.env.LULL_WIDE_JOB);
page.once("dialog", (d) => d.accept());
await page.click(`tr[data-job="${wideJob}"] [data-action="cancel"]`);
await page.locator('[data-testid="job-note"]', { hasText: `Job #${wideJob} cancelled.` }).waitFor();
await page.waitForFunction((id) => document.querySelector(`tr[data-job="${id}"] .pill`)?.textContent.trim() === "Cancelled", wideJob);
const cancelledJob = await getJson(`/api/v1/jobs/${wideJob}`);
assert.equal(cancelledJob.state, "cancelled");
assert.equal(cancelledJob.reason, "cancelled by admin");
assert.equal(await page.locator(`tr[data-job="${wideJob}"] [data-action="cancel"]`).count(), 0, "no Cancel once cancelled");
await page.selectOption('[data-testid="job-state"]', "completed");
await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="jobs"] .pill')].every((p) => p.textContent.trim() === "Completed"));
assert.equal(await page.locator('[data-testid="jobs"] tbody tr').count(), jobs.filter((j) => j.state === "completed").length);
step(`jobs: ${jobs.length} listed, output shown, job ${wideJob} cancelled`);

// 6. An owner's key shows that owner's machines and jobs only.
await page.click("text=Sign out");
await page.locator("#key").waitFor();
await page.fill("#key", ownerKey);
await page.click("button[type=submit]");
await page.click('a[data-page="overview"]');
await page.locator('[data-testid="machines"]').waitFor();
const mine = await getJson("/api/v1/agents", ownerKey);
assert.ok(mine.length > 0 && mine.length < agents.length, "the owner has some machines, not all");
const owners = await page.$$eval('[data-testid="machines"] tbody tr td:nth-child(2)', (tds) => tds.map((t) => t.textContent));
assert.deepEqual(owners, mine.map(() => owner), "only the owner's machines are listed");
assert.match(await page.locator("header .who").innerText(), new RegExp(`owner ${owner}`));
await shot("6-owner-overview");
// The owner's jobs: their own and those that ran on their machines; Cancel on their own only.
await page.click('a[data-page="jobs"]');
await page.locator('[data-testid="jobs"]').waitFor();
const ownerJobs = await getJson("/api/v1/jobs?limit=200", ownerKey);
assert.deepEqual(await jobRows(), ownerJobs.map(asShown), "the owner's job list is the API's");
assert.ok(ownerJobs.some((j) => j.submitter !== owner), "jobs others submitted that ran on the owner's machines are listed");
assert.ok(ownerJobs.every((j) => !j.may_cancel || j.submitter === owner), "Cancel only on the owner's own jobs");
await shot("6-owner-jobs");
await page.click('a[data-page="overview"]');
await page.locator('[data-testid="machines"]').waitFor();
// A reload keeps the session (sessionStorage); the key is not in the URL or localStorage.
await page.reload();
await page.locator('[data-testid="machines"]').waitFor();
assert.equal(await page.evaluate(() => localStorage.length), 0);
step(`owner ${owner}: ${mine.length} machines`);

// 7. A new, empty pool: every page says in words why it is empty and what to do.
const emptyUrl = process.env.LULL_EMPTY_URL;
if (emptyUrl) {
  await page.click("text=Sign out");
  await page.goto(emptyUrl + "/#overview");
  await page.fill("#key", process.env.LULL_EMPTY_KEY);
  await page.click("button[type=submit]");
  await page.locator(".empty", { hasText: "No machine has joined yet" }).waitFor();
  await page.locator(".empty", { hasText: "No jobs yet" }).waitFor();
  await shot("7-empty-overview");
  for (const [p, text] of [["donated", "No donated time since"], ["interruptions", "No machines enrolled yet"], ["jobs", "No jobs yet"]]) {
    await page.click(`a[data-page="${p}"]`);
    await page.locator(".empty", { hasText: text }).waitFor();
  }
  await page.click('a[data-page="donated"]');
  await page.locator(".empty").waitFor();
  await shot("8-empty-donated");
  step("an empty pool explains itself on every page");
}

assert.deepEqual(errors, [], "no script errors");
await browser.close();
step("all checks passed");
