// Runs before the app's modules. (1) Under LANG=C, WebKit reports navigator.language as
// "C", which Intl (and so uPlot's date axis) rejects with a RangeError: fall back to
// en-US. (2) Shows any script error in the window instead of leaving it blank.
try {
  new Intl.DateTimeFormat(navigator.language);
} catch (e) {
  Object.defineProperty(navigator, "language", { value: "en-US" });
  Object.defineProperty(navigator, "languages", { value: ["en-US"] });
}
window.addEventListener("error", function (e) {
  var p = document.createElement("pre");
  p.style.cssText = "color:#b42318;white-space:pre-wrap;padding:16px;font:13px monospace";
  p.textContent = "Lull window error: " + (e.message || e) + (e.filename ? "\n" + e.filename + ":" + e.lineno : "");
  document.body.appendChild(p);
});
window.addEventListener("unhandledrejection", function (e) {
  var p = document.createElement("pre");
  p.style.cssText = "color:#b42318;white-space:pre-wrap;padding:16px;font:13px monospace";
  p.textContent = "Lull window error: " + (e.reason && e.reason.stack ? e.reason.stack : String(e.reason));
  document.body.appendChild(p);
});
