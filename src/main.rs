/// Training allocates and frees many short-lived tensors; glibc's malloc hands large blocks
/// back to the kernel and page-faults them in again every step (a large share of step time
/// in profiles). mimalloc keeps and reuses them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 2.x and 3.x (`mimalloc.h`; the Rust binding has no
/// constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    // A training step frees all its activations at the end of backward and allocates them
    // again in the next forward, milliseconds later: never hand that memory back to the OS
    // (measured on the large STM step: 65 000 page faults per 6 steps → 1 200, ~10% faster).
    // SAFETY: sets a process-wide allocator option; called before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    // Before any thread starts (so the unsafe environment writes race with nothing):
    // SAFETY: single-threaded at this point.
    unsafe {
        // memctl owns threading (a rayon pool per trial, sized to its budget); candle's
        // separate spinning pool for element-wise ops would compete with it for the cores
        // (measured: 8x slower steps under load). Respect an explicit setting.
        if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
            std::env::set_var("CANDLE_NUM_THREADS", "1");
        }
        // candle asks for the thread count at every matrix product and, without this, parses
        // /proc/cpuinfo each time (measured: ~10% of a step in the kernel). The count only
        // decides whether a product may split; the trial's pool bounds the threads it gets.
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            std::env::set_var("RAYON_NUM_THREADS", cores.to_string());
        }
        // Like other Unix tools, exit quietly when the reader of our output goes away
        // (`memctl runs | head`) instead of panicking on a broken pipe.
        #[cfg(unix)]
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // A crash inside a native library (the CUDA driver, cuBLAS) kills the process with no
        // word of where; for reports, MEMCTL_CRASH_BACKTRACE=1 prints the crashing thread's stack.
        #[cfg(unix)]
        if std::env::var_os("MEMCTL_CRASH_BACKTRACE").is_some() {
            for signal in [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT] {
                libc::signal(signal, print_backtrace_and_die as *const () as libc::sighandler_t);
            }
        }
    }
    std::process::exit(memctl::cli::main())
}

/// Prints the stack and dies of `signal` (not async-signal-safe: the process is crashing
/// anyway, and a stack is worth the risk).
#[cfg(unix)]
extern "C" fn print_backtrace_and_die(signal: libc::c_int) {
    let thread = std::thread::current();
    eprintln!(
        "memctl: fatal signal {signal} on thread {:?}; stack:\n{}",
        thread.name().unwrap_or("unnamed"),
        std::backtrace::Backtrace::force_capture()
    );
    // SAFETY: restores the default action and re-raises, so the process ends as it would have.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}
