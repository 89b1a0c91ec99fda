//! The coordinator dashboard's files (built by `ui/`'s Vite into `ui/dist-dashboard`),
//! compiled into the binary with rust-embed so `lull coordinator serve` and `lull up`
//! serve it from any directory. Debug builds read the folder at run time instead (a
//! `npm run build` shows without recompiling). When the folder was missing at build
//! time, `/` answers a page that says how to build it; the API works either way.

use super::extract::ApiError;
use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};

#[derive(rust_embed::RustEmbed)]
#[folder = "../ui/dist-dashboard"]
#[allow_missing = true]
struct Assets;

/// The page served at `/` when the dashboard was not built into this binary.
const NOT_BUILT: &str = "<!doctype html><html><head><meta charset=utf-8><title>Lull coordinator</title></head><body \
    style=\"font:15px/1.5 system-ui,sans-serif;max-width:44em;margin:40px auto;color:#1d2430\">\
    <h1>Lull coordinator</h1><p>This coordinator was built without its dashboard (<code>ui/dist-dashboard</code> \
    was missing when it was compiled). Build it with <code>(cd ui &amp;&amp; npm install &amp;&amp; npm run build)</code>, \
    then rebuild <code>lull</code>.</p><p>The API works without it: <a href=\"/api/openapi.json\">the API (OpenAPI)</a>, \
    <a href=\"/metrics\">metrics</a>, and <code>lull report --by owner --since 7d</code>.</p></body></html>";

/// True if the dashboard's page is available.
pub fn built() -> bool {
    Assets::get("dashboard.html").is_some()
}

fn file(path: &str, cache: &'static str) -> Option<Response> {
    let f = Assets::get(path)?;
    let mime = f.metadata.mimetype().to_string();
    let mut r = (StatusCode::OK, f.data.into_owned()).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(&mime).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    Some(r)
}

/// `/`: the dashboard's page, or the not-built page.
pub async fn index() -> Response {
    // The page names its assets by content hash, so only the page itself must not be cached.
    file("dashboard.html", "no-cache").unwrap_or_else(|| Html(NOT_BUILT).into_response())
}

/// `/assets/{*path}`: the dashboard's scripts and styles (names carry a content hash).
pub async fn asset(path: Result<Path<String>, axum::extract::rejection::PathRejection>) -> Response {
    let missing = || ApiError::new(StatusCode::NOT_FOUND, "no such file".into()).into_response();
    let Ok(Path(p)) = path else { return missing() };
    if p.split('/').any(|s| s == ".." || s.is_empty()) {
        return missing();
    }
    file(&format!("assets/{p}"), "public, max-age=31536000, immutable").unwrap_or_else(missing)
}
