fn main() {
    // Like other Unix tools, exit quietly when the reader of our output goes away
    // (`memctl runs | head`) instead of panicking on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(memctl::cli::main())
}
