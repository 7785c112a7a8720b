//! A page loaded in a real browser: headless Chromium opens an HTML file,
//! writes a screenshot, and prints what the page logged; the screenshot is
//! decoded and measured.
//!
//! Chromium started with `--enable-logging=stderr` prints every message of
//! the page's console (any level: `console.log`, `console.error`, an
//! uncaught exception) as one stderr line of the form
//! `[pid:tid:time:INFO:CONSOLE:LINE] "message", source: URL (LINE)`. The
//! pages checked here hold no script, so any such line is an error.
//!
//! A page that needs something from outside is not self-contained, but
//! Chromium prints nothing on stderr when such a load fails (no `ERR_`
//! line, no console message: tried with a stylesheet, a script and an
//! image from the network). So the run also writes Chromium's NetLog, and
//! every network request the page made is listed. The network is cut off
//! (every host resolves to nothing), so nothing is fetched and a page that
//! needed it renders without it.
//!
//! Which Chromium: `$MMLAB_CHROMIUM`, else the first of `chromium`,
//! `chromium-browser`, `google-chrome` on the `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What loading a page showed.
#[derive(Clone, Debug, PartialEq)]
pub struct BrowserReport {
    /// The page's console messages (stderr lines with `:CONSOLE`).
    pub console: Vec<String>,
    /// The URLs of the network requests the page made (none for a
    /// self-contained page), from the NetLog.
    pub network: Vec<String>,
    /// Wall time of the whole headless run (start, load, render, write
    /// the screenshot, exit), ms.
    pub wall_ms: u64,
    /// The screenshot's size, bytes.
    pub png_bytes: u64,
    /// Its width and height, pixels.
    pub size: (u32, u32),
    /// Distinct RGB colours in it (counted up to 4,096).
    pub distinct_colours: usize,
    /// The fraction of its pixels that are not white.
    pub non_white_fraction: f64,
}

/// The Chromium binary to use.
///
/// # Errors
/// None found: the message names the candidates.
pub fn chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("MMLAB_CHROMIUM") {
        return Ok(PathBuf::from(p));
    }
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no headless browser: none of {} on PATH (set MMLAB_CHROMIUM)", names.join(", ")))
}

/// Opens `html` in headless Chromium in a window of `window` (width,
/// height) pixels, writes the screenshot to `png`, and measures it. The
/// run is killed after a minute.
///
/// # Errors
/// No Chromium, a run that fails or hangs, or a screenshot that cannot be
/// read.
pub fn load_in_chromium(html: &Path, png: &Path, window: (u32, u32)) -> Result<BrowserReport, String> {
    let bin = chromium()?;
    let html = html.canonicalize().map_err(|e| format!("{}: {e}", html.display()))?;
    // A profile of its own per run: two runs at once must not share one.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = std::env::temp_dir().join(format!("mmlab-chromium-{}-{run}", std::process::id()));
    let _ = std::fs::remove_file(png);
    let netlog = profile.join("netlog.json");
    std::fs::create_dir_all(&profile).map_err(|e| format!("{}: {e}", profile.display()))?;
    let t0 = Instant::now();
    let mut child = Command::new(&bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg(format!("--window-size={},{}", window.0, window.1))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} did not finish within 60 s", bin.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_ms = t0.elapsed().as_millis() as u64;
    let log = reader.join().unwrap_or_default();
    let network = std::fs::read(&netlog).map_err(|e| format!("the NetLog {}: {e}", netlog.display()));
    let _ = std::fs::remove_dir_all(&profile);
    if !status.success() {
        return Err(format!("{} exited with {status}:\n{log}", bin.display()));
    }
    let network = page_requests(&network?)?;
    let console = log.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    let bytes = std::fs::read(png).map_err(|e| format!("the screenshot {}: {e}", png.display()))?;
    let (size, distinct_colours, non_white_fraction) = measure(&bytes)?;
    Ok(BrowserReport {
        console,
        network,
        wall_ms,
        png_bytes: bytes.len() as u64,
        size,
        distinct_colours,
        non_white_fraction,
    })
}

/// The URLs the page asked the network for, read from a NetLog (JSON:
/// event type names in `constants.logEventTypes`, then `events`). Each
/// request logs one `URL_REQUEST_START_JOB` with its `url`. Chromium's own
/// background requests (update checks, the clock, accounts) are there too,
/// even under `--disable-background-networking`; what tells the page's
/// apart is the network isolation key, which for a request made by a
/// `file://` page names `file://` (Chromium's own have `null null`).
///
/// # Errors
/// A NetLog that is not JSON or names no `URL_REQUEST_START_JOB`.
fn page_requests(netlog: &[u8]) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_slice(netlog).map_err(|e| format!("the NetLog: {e}"))?;
    let start = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .ok_or("the NetLog names no URL_REQUEST_START_JOB event")?;
    let events = v["events"].as_array().ok_or("the NetLog has no events")?;
    let mut urls: Vec<String> = events
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start))
        .filter(|e| e["params"]["network_isolation_key"].as_str().is_some_and(|k| k.contains("file://")))
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
        .collect();
    urls.sort();
    urls.dedup();
    Ok(urls)
}

/// Decodes a PNG: its size, distinct colours (up to 4,096) and the
/// fraction of pixels that are not white.
fn measure(bytes: &[u8]) -> Result<((u32, u32), usize, f64), String> {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().map_err(|e| format!("not a PNG: {e}"))?;
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).map_err(|e| format!("PNG frame: {e}"))?;
    let px = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        t => return Err(format!("screenshot colour type {t:?}")),
    };
    if info.bit_depth != png::BitDepth::Eight {
        return Err(format!("screenshot bit depth {:?}", info.bit_depth));
    }
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0u64;
    let pixels = &buf[..info.buffer_size()];
    for p in pixels.chunks_exact(px) {
        if colours.len() < 4096 {
            colours.insert((p[0], p[1], p[2]));
        }
        non_white += u64::from(p[..3] != [255, 255, 255]);
    }
    let n = (pixels.len() / px).max(1) as f64;
    Ok(((info.width, info.height), colours.len(), non_white as f64 / n))
}

#[cfg(test)]
mod tests {
    use super::page_requests;

    /// Kept: the page's request (keyed to `file://`). Dropped: Chromium's
    /// own (`null null`), other event types, a start with no URL.
    #[test]
    fn netlog_lists_the_pages_requests_only() {
        let log = br#"{"constants":{"logEventTypes":{"URL_REQUEST_START_JOB":136,"REQUEST_ALIVE":2}},"events":[
            {"type":136,"params":{"url":"https://cdn.example/x.css","network_isolation_key":"file:// [internally: file://] file:// [internally: file://]"}},
            {"type":136,"params":{"url":"https://cdn.example/x.css","network_isolation_key":"file:// file://"}},
            {"type":136,"params":{"url":"http://clients2.google.com/time/1/current","network_isolation_key":"null null"}},
            {"type":2,"params":{"url":"http://example.com/a.png","network_isolation_key":"file:// file://"}},
            {"type":136,"params":{"network_isolation_key":"file:// file://"}},
            {"type":136}]}"#;
        assert_eq!(page_requests(log).unwrap(), ["https://cdn.example/x.css"]);
        assert!(page_requests(b"{\"events\":[]}").unwrap_err().contains("URL_REQUEST_START_JOB"));
        assert!(page_requests(b"{\"constants\":").is_err());
    }
}
