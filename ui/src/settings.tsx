// The settings window. Every value is checked by the agent's own `Config::validate`
// (through the `save_settings` command); a refused value is shown next to its field with
// the reason and the allowed range. Nothing here duplicates the ranges.
import { useEffect, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import type { AllowedHours, CalibrationView, Config, EvictionMode, FieldError, Settings } from "./bindings";
import { getCurrentWindow } from "@tauri-apps/api/window";
import { calibrate, getSettings, runningPrograms, saveSettings } from "./api";

/** The window title says the outcome too (visible in the task bar, and to tests). */
const title = (t: string) => void getCurrentWindow().setTitle(t).catch(() => {});

type Days = keyof AllowedHours;
const DAYS: [Days, string][] = [
  ["mon", "Monday"],
  ["tue", "Tuesday"],
  ["wed", "Wednesday"],
  ["thu", "Thursday"],
  ["fri", "Friday"],
  ["sat", "Saturday"],
  ["sun", "Sunday"],
];

/** A numeric field: its dotted config path, and how it is shown (display = stored × scale). */
interface Num {
  path: string;
  label: string;
  unit: string;
  scale: number;
  help?: ComponentChildren;
}

const get = (c: Config, path: string): unknown => path.split(".").reduce<any>((o, k) => o?.[k], c);
function set(c: Config, path: string, v: unknown): Config {
  const copy = structuredClone(c) as any;
  const keys = path.split(".");
  let o = copy;
  for (const k of keys.slice(0, -1)) o = o[k];
  o[keys[keys.length - 1]] = v;
  return copy;
}

function fmt(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

/** The message shown for a refused field, in the units the field is shown in. */
function explain(e: FieldError, f?: Num): string {
  if (f && e.range) return `Out of range: allowed ${fmt(e.range[0] * f.scale)}–${fmt(e.range[1] * f.scale)}${f.unit ? " " + f.unit : ""}.`;
  return e.message;
}

export function SettingsView() {
  const [s, setS] = useState<Settings | null>(null);
  const [text, setText] = useState<Record<string, string>>({});
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState<string>("");
  const [loadErr, setLoadErr] = useState<string | null>(null);
  const [programs, setPrograms] = useState<string[] | null>(null);
  const [newProgram, setNewProgram] = useState("");
  const [calib, setCalib] = useState<CalibrationView | "asking" | string | null>(null);
  useEffect(() => {
    getSettings().then(setS, (e) => setLoadErr(String(e)));
  }, []);
  if (loadErr) return <main class="error">Cannot reach the Lull agent: {loadErr}</main>;
  if (!s) return <main class="muted">Loading…</main>;
  const c = s.config;
  const update = (cfg: Config) => {
    setS({ ...s, config: cfg });
    setSaved("");
  };

  const numbers: Record<string, Num> = {};
  const num = (f: Num, autofocus = false) => {
    numbers[f.path] = f;
    const stored = get(c, f.path) as number;
    const shown = text[f.path] ?? fmt(stored * f.scale);
    const err = errors[f.path];
    return (
      <div class={"field" + (err ? " bad" : "")}>
        <label for={f.path}>{f.label}</label>
        <div class="input">
          <input id={f.path} name={f.path} type="text" inputMode="decimal" value={shown} autoFocus={autofocus}
            onInput={(e) => setText({ ...text, [f.path]: (e.target as HTMLInputElement).value })} />
          {f.unit && <span class="unit">{f.unit}</span>}
        </div>
        {err && <p class="err" role="alert" id={`${f.path}-error`}>{err}</p>}
        {f.help && <p class="help">{f.help}</p>}
      </div>
    );
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    // Turn the typed text into numbers; a non-number is refused here, ranges by the agent.
    let cfg = c;
    const local: Record<string, string> = {};
    for (const [path, f] of Object.entries(numbers)) {
      const t = text[path];
      if (t === undefined) continue;
      const v = Number(t.trim().replace(",", "."));
      if (t.trim() === "" || !Number.isFinite(v)) local[path] = `“${t}” is not a number`;
      else cfg = set(cfg, path, Math.round((v / f.scale) * 1e6) / 1e6);
    }
    if (Object.keys(local).length) {
      setErrors(local);
      setSaved("");
      title(`Lull settings: not saved (${Object.keys(local)[0]})`);
      return;
    }
    try {
      const out = await saveSettings({ ...s, config: cfg });
      setS(out);
      setText({});
      setErrors({});
      setSaved("Saved. The agent uses these settings now.");
      title("Lull settings: saved");
    } catch (err) {
      const fe = err as FieldError;
      const field = fe.field?.replace(/\[\d+\]$/, "") ?? "";
      const key = field && field !== "autostart" ? field : "general";
      setErrors({ [key]: explain(fe, numbers[field]) });
      setSaved("");
      title(`Lull settings: not saved (${key})`);
    }
  };

  const exclusive = c.rules.exclusive_programs;
  const addProgram = (name: string) => {
    const n = name.trim();
    if (n && !exclusive.includes(n)) update(set(c, "rules.exclusive_programs", [...exclusive, n]));
    setNewProgram("");
  };
  const askCalibration = () => {
    setCalib("asking");
    calibrate(c.budget.interruptions_per_day).then(
      (v) => {
        setCalib(v);
        title(v.calibrated ? "Lull settings: calibration ready" : `Lull settings: calibration needs ${fmt(v.need_days)} more days`);
      },
      (e) => setCalib(`Calibration failed: ${e}`),
    );
  };
  /** Puts the derived thresholds into the form; Save applies them like any other edit. */
  const useCalibration = (v: CalibrationView) => {
    let cfg = c;
    if (v.owner_cpu_max != null) cfg = set(cfg, "availability.owner_cpu_max", v.owner_cpu_max);
    if (v.recruitment_threshold_s != null) cfg = set(cfg, "availability.recruitment_threshold_s", v.recruitment_threshold_s);
    const { ["availability.owner_cpu_max"]: _a, ["availability.recruitment_threshold_s"]: _b, ...rest } = text;
    setText(rest);
    update(cfg);
    title("Lull settings: calibrated values not saved yet");
  };
  const mode = c.eviction.mode;
  const hoursErr = (d: Days) => errors[`rules.hours.${d}`];
  return (
    <main>
      <form onSubmit={submit} novalidate>
        <h1>Lull settings</h1>
        {Object.keys(errors).length > 0 && (
          <p class="banner bad" id="refused">Not saved: {errors.general ?? "fix the field marked in red."}</p>
        )}
        {saved && <p class="banner ok" id="saved">{saved}</p>}

        <fieldset>
          <legend>Daily interruption limit</legend>
          {num(
            {
              path: "budget.interruptions_per_day", label: "Interrupt me at most", unit: "times a day", scale: 1,
              help: (
                <>
                  An <b>interruption</b> is when you come back while guest work is running on this machine (or just after it ran). Once
                  this many have happened today, Lull takes your machine out of the pool until tomorrow. <b>0</b> means guest work runs
                  only when you click <i>Donate now</i>. With fewer than 5 a day many pool jobs never finish; 5 or more lets nearly all
                  finish.
                </>
              ),
            },
            true,
          )}
        </fieldset>

        <fieldset>
          <legend>When Lull may start guest work</legend>
          <p class="help">Only while you are away (no keyboard or mouse) and your own programs are quiet, and only once that has lasted a while.</p>
          {num({
            path: "availability.owner_cpu_max", label: "Idle while your programs use less than", unit: "% CPU", scale: 100,
            help: "Above this, Lull counts the machine as in use even without keyboard or mouse activity.",
          })}
          {num({
            path: "availability.recruitment_threshold_s", label: "Offer the machine after it has been idle for", unit: "s", scale: 1,
            help: "Longer means fewer interruptions and less donated time.",
          })}
          <div class="calibration" id="calibration">
            <button type="button" id="calibrate" onClick={askCalibration} disabled={calib === "asking"}>
              Calibrate from my machine's history
            </button>
            <p class="help">Derives both values from how this machine has actually been used (the activity Lull recorded, at least 3 days), for your daily limit above.</p>
            {calib === "asking" && <p class="muted">Reading the recorded activity…</p>}
            {typeof calib === "string" && calib !== "asking" && <p class="err" role="alert">{calib}</p>}
            {calib && typeof calib === "object" && !calib.calibrated && (
              <p class="banner" id="calibration-refused">{calib.reasoning[0]}</p>
            )}
            {calib && typeof calib === "object" && calib.calibrated && (
              <div id="calibration-result">
                <p>
                  Suggested: idle below <b>{fmt((calib.owner_cpu_max ?? 0) * 100)} % CPU</b>, offer after <b>{calib.recruitment_threshold_s} s</b>{" "}
                  (from {fmt(calib.have_days)} days, for {calib.budget} interruptions a day).
                </p>
                <ul class="reasoning">{calib.reasoning.map((l) => <li>{l}</li>)}</ul>
                {calib.plot_svg && <div class="plot" aria-label="Donated hours and interruptions per day against the threshold" dangerouslySetInnerHTML={{ __html: calib.plot_svg }} />}
                <button type="button" id="calibration-use" onClick={() => useCalibration(calib)}>Use these values</button>
                <span class="muted"> then Save.</span>
              </div>
            )}
          </div>
        </fieldset>

        <fieldset>
          <legend>When you come back while guest work runs</legend>
          <label class="radio">
            <input type="radio" name="mode" checked={mode === "immediate-eviction"} onChange={() => update(set(c, "eviction.mode", "immediate-eviction" as EvictionMode))} />
            <span><b>Stop at once</b>: guest work is stopped the moment you touch the machine.</span>
          </label>
          <label class="radio">
            <input type="radio" name="mode" checked={mode === "linger-longer"} onChange={() => update(set(c, "eviction.mode", "linger-longer" as EvictionMode))} />
            <span><b>Linger quietly</b>: while you only read or type, guest work keeps running at the lowest priority and yields to everything you do; it stops when you really need the CPU.</span>
          </label>
          {mode !== "immediate-eviction" && mode !== "linger-longer" && <p class="help">Currently “{mode}” (set in the config file).</p>}
        </fieldset>

        <fieldset>
          <legend>Lending while you work lightly</legend>
          <label class="check">
            <input type="checkbox" id="availability.lend_while_light" checked={c.availability.lend_while_light}
              onChange={(e) => update(set(c, "availability.lend_while_light", (e.target as HTMLInputElement).checked))} />
            Lend while I work lightly: guest work may also start while I am here, when my programs have used little CPU for a while
          </label>
          <p class="help">
            Guest work then runs at the lowest priority and yields to everything you do (about 1 % slowdown at most). It is not counted as an
            interruption unless your own work grows and it has to be stopped.
          </p>
          {c.availability.lend_while_light && num({ path: "availability.light_cpu_max", label: "Light means my CPU stays below", unit: "% of the machine", scale: 100 })}
          {c.availability.lend_while_light && num({ path: "availability.light_for_s", label: "For at least", unit: "s", scale: 1 })}
        </fieldset>

        <fieldset>
          <legend>How much of this machine guests may use</legend>
          {num({ path: "caps.cpu_max", label: "CPU, at most", unit: "% of the machine", scale: 100 })}
          {num({ path: "caps.memory_max", label: "Memory, at most", unit: "% of memory", scale: 100, help: "Guests also never use memory your programs need: only what is free." })}
        </fieldset>

        <fieldset>
          <legend>Hours when guest work may run</legend>
          <p class="help">For each day: all day, not at all, or only in ranges like 09:00-12:00, 13:00-17:30.</p>
          {DAYS.map(([d, name]) => {
            const v = c.rules.hours[d];
            const kind = v == null ? "all" : v.length === 0 ? "none" : "some";
            const path = `rules.hours.${d}`;
            return (
              <div class={"day" + (hoursErr(d) ? " bad" : "")}>
                <label for={`${path}-kind`}>{name}</label>
                <select id={`${path}-kind`} value={kind}
                  onChange={(e) => {
                    const k = (e.target as HTMLSelectElement).value;
                    update(set(c, path, k === "all" ? null : k === "none" ? [] : ["09:00-17:00"]));
                  }}>
                  <option value="all">all day</option>
                  <option value="none">not at all</option>
                  <option value="some">only from–to</option>
                </select>
                {kind === "some" && (
                  <input id={path} type="text" value={(v ?? []).join(", ")}
                    onChange={(e) => update(set(c, path, (e.target as HTMLInputElement).value.split(",").map((x) => x.trim()).filter(Boolean)))} />
                )}
                {hoursErr(d) && <p class="err" role="alert">{hoursErr(d)}</p>}
              </div>
            );
          })}
        </fieldset>

        <fieldset>
          <legend>Battery and CPU temperature</legend>
          <label class="check">
            <input type="checkbox" checked={c.rules.allow_on_battery} onChange={(e) => update(set(c, "rules.allow_on_battery", (e.target as HTMLInputElement).checked))} />
            Donate while running on battery
          </label>
          {num({ path: "rules.cpu_temp_max_c", label: "Stop guest work when the CPU reaches", unit: "°C", scale: 1 })}
        </fieldset>

        <fieldset>
          <legend>Programs that need the whole machine</legend>
          <p class="help">While one of these runs (a game, a video call, a render), no guest work does; stopping guest work for them is not counted as an interruption.</p>
          <div class={"field" + (errors["rules.exclusive_programs"] ? " bad" : "")}>
            <ul class="programs" id="rules.exclusive_programs">
              {exclusive.map((p) => (
                <li>
                  <code>{p}</code>{" "}
                  <button type="button" aria-label={`Remove ${p}`} onClick={() => update(set(c, "rules.exclusive_programs", exclusive.filter((x) => x !== p)))}>Remove</button>
                </li>
              ))}
              {exclusive.length === 0 && <li class="muted">None</li>}
            </ul>
            <div class="input">
              <input id="exclusive-new" type="text" list="running-programs" placeholder="program name, or its full path" value={newProgram}
                onFocus={() => programs === null && runningPrograms().then(setPrograms, () => setPrograms([]))}
                onInput={(e) => setNewProgram((e.target as HTMLInputElement).value)}
                onKeyDown={(e) => { if (e.key === "Enter") { e.preventDefault(); addProgram(newProgram); } }} />
              <datalist id="running-programs">{(programs ?? []).map((p) => <option value={p} />)}</datalist>
              <button type="button" id="exclusive-add" onClick={() => addProgram(newProgram)}>Add</button>
            </div>
            {errors["rules.exclusive_programs"] && <p class="err" role="alert">{errors["rules.exclusive_programs"]}</p>}
            <p class="help">Type a name, or pick one of the programs running now from the list.</p>
          </div>
        </fieldset>

        <fieldset>
          <legend>The pool this machine donates to</legend>
          <div class={"field" + (errors["coordinator.url"] ? " bad" : "")}>
            <label for="coordinator.url">Coordinator address</label>
            <input id="coordinator.url" type="text" placeholder="https://pool.example.org" value={c.coordinator.url}
              onChange={(e) => update(set(c, "coordinator.url", (e.target as HTMLInputElement).value))} />
            {errors["coordinator.url"] && <p class="err" role="alert">{errors["coordinator.url"]}</p>}
          </div>
          <div class={"field" + (errors["coordinator.join_token"] ? " bad" : "")}>
            <label for="coordinator.join_token">Join token</label>
            <input id="coordinator.join_token" type="password" autoComplete="off" value={c.coordinator.join_token}
              onChange={(e) => update(set(c, "coordinator.join_token", (e.target as HTMLInputElement).value))} />
            {errors["coordinator.join_token"] && <p class="err" role="alert">{errors["coordinator.join_token"]}</p>}
          </div>
        </fieldset>

        <fieldset>
          <legend>Notifications and start-up</legend>
          <label class="check">
            <input type="checkbox" checked={c.notifications.enabled} onChange={(e) => update(set(c, "notifications.enabled", (e.target as HTMLInputElement).checked))} />
            Tell me when guest work is stopped because I came back, when today's budget is used up, and when my memory took over a second to restore
          </label>
          {num({ path: "notifications.min_interval_s", label: "At most one notice of a kind every", unit: "min", scale: 1 / 60 })}
          <label class="check">
            <input type="checkbox" checked={s.autostart} onChange={(e) => { setS({ ...s, autostart: (e.target as HTMLInputElement).checked }); setSaved(""); }} />
            Start Lull when I log in
          </label>
        </fieldset>

        <footer>
          <button type="submit" class="primary">Save</button>
          <span class="muted">Esc closes without saving.</span>
        </footer>
      </form>
    </main>
  );
}
