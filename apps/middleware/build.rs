//! Compiles the Java service in `java/` with the installed JDK's `javac` and
//! packs it into `$OUT_DIR/taillab-jbb.jar`, which the crate embeds, so a
//! fresh clone builds with whatever JDK 17+ the setup installed.
use std::path::{Path, PathBuf};
use std::process::Command;

fn java_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("read apps/middleware/java")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            java_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "java") {
            println!("cargo:rerun-if-changed={}", p.display());
            out.push(p);
        }
    }
}

/// `$JAVA_HOME/bin/<tool>` when JAVA_HOME is set, else `<tool>` from PATH.
fn tool(name: &str) -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin").join(name))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn run(cmd: &mut Command) {
    let what = format!("{cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{what} failed ({s})"),
        Err(e) => panic!(
            "cannot run {what}: {e}; install a JDK 17 (Debian openjdk-17-jdk-headless, \
             see apps/middleware/apt.txt) or set JAVA_HOME"
        ),
    }
}

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let classes = out.join("classes");
    let _ = std::fs::remove_dir_all(&classes);
    let mut files = Vec::new();
    java_files(Path::new("java"), &mut files);
    files.sort();
    // --release 17: the bytecode runs on any JDK from 17 on, whichever javac built it.
    run(Command::new(tool("javac"))
        .args(["--release", "17", "-Xlint:all", "-Werror", "-d"])
        .arg(&classes)
        .args(&files));
    run(Command::new(tool("jar"))
        .arg("cf")
        .arg(out.join("taillab-jbb.jar"))
        .arg("-C")
        .arg(&classes)
        .arg("."));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
}
