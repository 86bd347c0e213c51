fn main() {
    // Before any thread starts (so the unsafe environment writes race with nothing):
    // SAFETY: single-threaded at this point.
    unsafe {
        // memctl owns threading (a rayon pool per trial, sized to its budget); candle's
        // separate spinning pool for element-wise ops would compete with it for the cores
        // (measured: 8x slower steps under load). Respect an explicit setting.
        if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
            std::env::set_var("CANDLE_NUM_THREADS", "1");
        }
        // Like other Unix tools, exit quietly when the reader of our output goes away
        // (`memctl runs | head`) instead of panicking on a broken pipe.
        #[cfg(unix)]
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(memctl::cli::main())
}
