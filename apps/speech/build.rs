//! Links the system PocketSphinx 0.8 (Debian `libpocketsphinx-dev`) found by pkg-config.
fn main() {
    for lib in ["pocketsphinx", "sphinxbase"] {
        if let Err(e) = pkg_config::Config::new().probe(lib) {
            // One clear message instead of a linker error much later.
            panic!(
                "pkg-config could not find `{lib}` ({e}); install the Debian packages in \
                 apps/speech/apt.txt (libpocketsphinx-dev libsphinxbase-dev)"
            );
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
