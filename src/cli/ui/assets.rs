//! The dashboard's page, embedded: one HTML file, its script and its style sheet, no
//! third-party code and nothing fetched from the network.

/// The content type and bytes of the asset at `path`, if there is one.
pub fn get(path: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", include_bytes!("assets/index.html")),
        "/app.js" => ("text/javascript; charset=utf-8", include_bytes!("assets/app.js")),
        "/style.css" => ("text/css; charset=utf-8", include_bytes!("assets/style.css")),
        _ => return None,
    })
}
