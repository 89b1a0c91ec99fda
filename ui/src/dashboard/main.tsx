// The coordinator dashboard: a key prompt, then four pages (hash routes): overview,
// donated time, interruptions, jobs. Served by the coordinator at `/`; talks only to its
// REST API with the key the user typed.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import * as api from "./api";
import { Donated } from "./donated";
import { Interruptions } from "./interruptions";
import { Jobs } from "./jobs";
import { Overview } from "./overview";
import "../style.css";
import "./dashboard.css";

const PAGES = {
  overview: { title: "Overview", view: Overview },
  donated: { title: "Donated time", view: Donated },
  interruptions: { title: "Interruptions", view: Interruptions },
  jobs: { title: "Jobs", view: Jobs },
} as const;
type Page = keyof typeof PAGES;
const pageOf = (): Page => {
  const h = location.hash.replace(/^#\/?/, "");
  return h in PAGES ? (h as Page) : "overview";
};

function Login({ onIn, note }: { onIn: (v: api.PoolSummary["viewer"]) => void; note?: string }) {
  const [key, setKey] = useState("");
  const [err, setErr] = useState(note ?? "");
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) {
      setErr("Paste a key first: the admin key from coordinator-admin.key, or an owner key.");
      return;
    }
    try {
      const p = await api.pool(k);
      api.saveKey(k);
      onIn(p.viewer);
    } catch (x) {
      setErr(x instanceof api.ApiError && x.status === 401 ? "That key is not known to this coordinator." : x instanceof api.ApiError && x.status === 403 ? "Agent secrets cannot open the dashboard: use an admin or owner key." : `Could not reach the coordinator: ${x}`);
    }
  };
  return (
    <main class="login">
      <h1>Lull pool dashboard</h1>
      <form onSubmit={submit}>
        <label for="key">API key</label>
        <input id="key" type="password" autocomplete="off" placeholder="lull_admin_… or lull_owner_…" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
        <button class="primary" type="submit">
          Open
        </button>
        {err && <p class="err">{err}</p>}
      </form>
      <p class="help">
        An <b>admin key</b> shows the whole pool; an <b>owner key</b> shows only that owner's machines and jobs. <code>lull up</code> writes the admin key
        to <code>coordinator-admin.key</code> in its data directory and prints the path; <code>lull coordinator key create --role owner --owner NAME</code> makes an
        owner key. The key stays in this browser tab only.
      </p>
    </main>
  );
}

function App() {
  const [viewer, setViewer] = useState<api.PoolSummary["viewer"] | null>(null);
  const [checking, setChecking] = useState(api.savedKey() !== null);
  const [note, setNote] = useState<string | undefined>();
  const [page, setPage] = useState<Page>(pageOf());
  const [tick, setTick] = useState(0);
  const [updated, setUpdated] = useState(new Date());
  useEffect(() => {
    const k = api.savedKey();
    if (k === null) return;
    api.pool(k).then(
      (p) => (setViewer(p.viewer), setChecking(false)),
      (e) => {
        if (e instanceof api.ApiError && (e.status === 401 || e.status === 403)) api.forgetKey();
        setNote(`Please sign in again (${e.message}).`);
        setChecking(false);
      },
    );
  }, []);
  useEffect(() => {
    const onHash = () => setPage(pageOf());
    addEventListener("hashchange", onHash);
    // Fresh figures every 30 s without a reload.
    const t = setInterval(() => (setTick((n) => n + 1), setUpdated(new Date())), 30_000);
    return () => (removeEventListener("hashchange", onHash), clearInterval(t));
  }, []);
  if (checking) return <p class="muted pad">Loading…</p>;
  if (!viewer) return <Login onIn={setViewer} note={note} />;
  const View = PAGES[page].view;
  return (
    <>
      <header class="top">
        <b class="brand">Lull pool</b>
        <nav>
          {(Object.keys(PAGES) as Page[]).map((p) => (
            <a href={`#${p}`} class={p === page ? "on" : ""} data-page={p}>
              {PAGES[p].title}
            </a>
          ))}
        </nav>
        <span class="who">
          {viewer.role === "admin" ? "admin: whole pool" : `owner ${viewer.owner}: own machines and jobs only`}
          <button onClick={() => (setTick((n) => n + 1), setUpdated(new Date()))} title={`updated ${updated.toLocaleTimeString()}`}>
            Refresh
          </button>
          <button onClick={() => (api.forgetKey(), setViewer(null), setNote(undefined))}>Sign out</button>
        </span>
      </header>
      <main class="dash" data-page={page}>
        <h1>{PAGES[page].title}</h1>
        <View tick={tick} />
      </main>
    </>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
