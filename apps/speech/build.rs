//! Links the system PocketSphinx 0.8 (Debian `libpocketsphinx-dev`) and spandsp (Debian
//! `libspandsp-dev`, for the G.722 recordings) found by pkg-config.
fn main() {
    for lib in ["pocketsphinx", "sphinxbase", "spandsp"] {
        if let Err(e) = pkg_config::Config::new().probe(lib) {
            // One clear message instead of a linker error much later.
            panic!(
                "pkg-config could not find `{lib}` ({e}); install the Debian packages in \
                 apps/speech/apt.txt (libpocketsphinx-dev libsphinxbase-dev libspandsp-dev)"
            );
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
