fn main() {
    std::process::exit(memctl::cli::main())
}
