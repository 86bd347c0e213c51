//! Headless Chromium for the dashboard's browser test and benchmark, driven over the DevTools
//! protocol (`headless_chrome`).

use std::path::PathBuf;
use std::time::Duration;

/// Chromium's binary: `MEMCTL_CHROMIUM`, else the first of Debian's and others' names on PATH.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMCTL_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// A headless browser with a fresh profile (kept in `profile`, which must outlive it) and a
/// 1280×800 window, and one tab.
pub fn launch(
    binary: PathBuf,
    profile: &std::path::Path,
) -> (headless_chrome::Browser, std::sync::Arc<headless_chrome::Tab>) {
    let options = headless_chrome::LaunchOptions::default_builder()
        .path(Some(binary))
        .headless(true)
        // Containers (CI) run as root, where Chromium's sandbox cannot start.
        .sandbox(false)
        .window_size(Some((1280, 800)))
        .user_data_dir(Some(profile.to_path_buf()))
        // The crate's defaults already turn off background networking, sync and first-run
        // pages; a closed network also wants no QUIC and no component updates.
        .args(vec!["--disable-gpu".as_ref(), "--disable-quic".as_ref(), "--disable-component-update".as_ref()])
        .idle_browser_timeout(Duration::from_secs(300))
        .build()
        .expect("launch options");
    let browser = headless_chrome::Browser::new(options).expect("Chromium starts");
    let tab = browser.new_tab().expect("a tab opens");
    tab.set_default_timeout(Duration::from_secs(60));
    (browser, tab)
}
