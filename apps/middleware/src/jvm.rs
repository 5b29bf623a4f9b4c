//! The embedded JVM: started once per process through the JNI invocation
//! API, with the service jar (compiled by build.rs) on its class path.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

use jni::objects::{JByteArray, JClass, JString, JValue};
use jni::refs::Global;
use jni::{jni_sig, jni_str, InitArgsBuilder, JNIVersion, JavaVM};
use taillab_core::{AppError, DataCtx, Worker};

use crate::APP;

/// The service classes, built from `java/` by build.rs.
static JAR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/taillab-jbb.jar"));

/// A HotSpot garbage collector available in OpenJDK 17.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gc {
    /// Garbage-First (`-XX:+UseG1GC`, the default): regional, mostly short stop-the-world pauses.
    G1,
    /// The throughput collector (`-XX:+UseParallelGC`): stop-the-world, multi-threaded.
    Parallel,
    /// ZGC (`-XX:+UseZGC`): concurrent, pauses well under a millisecond.
    Z,
    /// Shenandoah (`-XX:+UseShenandoahGC`): concurrent compaction, short pauses.
    Shenandoah,
    /// The serial collector (`-XX:+UseSerialGC`): one thread, stop-the-world.
    Serial,
}

impl Gc {
    /// The collector's name as the `gc` key spells it (and as `app_stats` reports it).
    pub fn name(self) -> &'static str {
        match self {
            Gc::G1 => "g1",
            Gc::Parallel => "parallel",
            Gc::Z => "zgc",
            Gc::Shenandoah => "shenandoah",
            Gc::Serial => "serial",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Gc::G1 => "-XX:+UseG1GC",
            Gc::Parallel => "-XX:+UseParallelGC",
            Gc::Z => "-XX:+UseZGC",
            Gc::Shenandoah => "-XX:+UseShenandoahGC",
            Gc::Serial => "-XX:+UseSerialGC",
        }
    }
}

impl FromStr for Gc {
    type Err = AppError;
    fn from_str(s: &str) -> Result<Self, AppError> {
        Ok(match s {
            "g1" => Gc::G1,
            "parallel" => Gc::Parallel,
            "zgc" | "z" => Gc::Z,
            "shenandoah" => Gc::Shenandoah,
            "serial" => Gc::Serial,
            _ => {
                return Err(AppError::BadParam {
                    key: "gc".into(),
                    value: s.into(),
                    expected: "one of g1, parallel, zgc, shenandoah, serial".into(),
                })
            }
        })
    }
}

/// The options the JVM was started with; fixed for the process's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmOptions {
    /// The garbage collector (`gc` key).
    pub gc: Gc,
    /// Heap size as given to both `-Xms` and `-Xmx`: digits and a unit k, m or g (`heap` key).
    pub heap: String,
}

fn engine(why: impl std::fmt::Display) -> AppError {
    AppError::Engine {
        engine: "jvm".into(),
        why: why.to_string(),
    }
}

/// Writes the embedded jar into the app's data folder (named by a hash of
/// its bytes, so a rebuilt service never runs stale classes) and returns
/// its path. Written to a temporary name and renamed, so concurrent
/// processes never see half a jar.
pub fn install_jar(data: &DataCtx) -> Result<PathBuf, AppError> {
    // FNV-1a: enough to tell builds apart, no dependency.
    let hash = JAR.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    let dir = data.app_dir(APP);
    let jar = dir.join(format!("taillab-jbb-{hash:016x}.jar"));
    if std::fs::metadata(&jar)
        .map(|m| m.len() == JAR.len() as u64)
        .unwrap_or(false)
    {
        return Ok(jar);
    }
    std::fs::create_dir_all(&dir).map_err(|e| AppError::io(&dir, e))?;
    let tmp = dir.join(format!(".jar-{}-{hash:016x}", std::process::id()));
    std::fs::write(&tmp, JAR).map_err(|e| AppError::io(&tmp, e))?;
    std::fs::rename(&tmp, &jar).map_err(|e| AppError::io(&jar, e))?;
    Ok(jar)
}

pub struct Jvm {
    vm: JavaVM,
    opts: JvmOptions,
    service: Global<JClass<'static>>,
}

static JVM: OnceLock<Jvm> = OnceLock::new();
static START: Mutex<()> = Mutex::new(());

impl Jvm {
    /// The process's JVM, started on first use with `opts`. A JVM cannot be
    /// restarted, so asking later for other options is an error that says so.
    pub fn get_or_start(jar: &Path, opts: &JvmOptions) -> Result<&'static Jvm, AppError> {
        let _g = START.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(j) = JVM.get() {
            if &j.opts != opts {
                return Err(AppError::BadParam {
                    key: "gc/heap".into(),
                    value: format!("{}/{}", opts.gc.name(), opts.heap),
                    expected: format!(
                        "the same as this process's JVM ({}/{}): a JVM starts once per process, \
                         run other GC settings in a separate `taillab run`",
                        j.opts.gc.name(),
                        j.opts.heap
                    ),
                });
            }
            return Ok(j);
        }
        let args = InitArgsBuilder::new()
            .version(JNIVersion::V1_8)
            .option(format!("-Djava.class.path={}", jar.display()))
            .option(opts.gc.flag())
            // A fixed heap: growing it mid-run would be one more source of pauses.
            .option(format!("-Xms{}", opts.heap))
            .option(format!("-Xmx{}", opts.heap))
            // Leave SIGINT/SIGTERM/SIGQUIT to the harness, which owns the process.
            .option("-Xrs")
            .build()
            .map_err(engine)?;
        let vm = JavaVM::new(args).map_err(|e| {
            engine(format!(
                "could not start the JVM with {}: {e} (is a JDK 17 installed? set JAVA_HOME)",
                opts.gc.flag()
            ))
        })?;
        let service = vm
            .attach_current_thread(|env| -> jni::errors::Result<_> {
                let class = env.find_class(jni_str!("taillab/jbb/Service"))?;
                env.new_global_ref(class)
            })
            .map_err(|e| {
                engine(format!(
                    "taillab/jbb/Service not loadable from {}: {e}",
                    jar.display()
                ))
            })?;
        Ok(JVM.get_or_init(|| Jvm {
            vm,
            opts: opts.clone(),
            service,
        }))
    }

    pub fn options(&self) -> &JvmOptions {
        &self.opts
    }

    /// (Re)builds the company: `warehouses` warehouses from `seed`.
    pub fn init(&self, warehouses: u16, seed: u64) -> Result<(), AppError> {
        self.vm
            .attach_current_thread(|env| -> jni::errors::Result<()> {
                env.call_static_method(
                    &self.service,
                    jni_str!("init"),
                    jni_sig!("(IJ)V"),
                    &[JValue::Int(warehouses.into()), JValue::Long(seed as i64)],
                )?;
                Ok(())
            })
            .map_err(|e| engine(format!("Service.init failed: {e}")))
    }

    /// Calls a static `String name()` of the service.
    pub fn call_string(&self, name: &str) -> Result<String, AppError> {
        let method = jni::strings::JNIString::from(name);
        self.vm
            .attach_current_thread(|env| -> jni::errors::Result<String> {
                let obj = env
                    .call_static_method(
                        &self.service,
                        &method,
                        jni_sig!("()Ljava/lang/String;"),
                        &[],
                    )?
                    .l()?;
                let s = env.cast_local::<JString>(obj)?;
                s.try_to_string(env)
            })
            .map_err(|e| engine(format!("Service.{name} failed: {e}")))
    }

    /// Attaches the calling thread (permanently: re-attaching per request
    /// would cost far more than a transaction).
    pub fn attach_worker(&'static self) -> Result<JbbWorker, AppError> {
        self.vm
            .attach_current_thread(|_env| -> jni::errors::Result<()> { Ok(()) })
            .map_err(|e| engine(format!("attaching a worker thread failed: {e}")))?;
        Ok(JbbWorker { jvm: self })
    }
}

/// One worker thread's handle: calls `Service.handle(byte[])`.
pub struct JbbWorker {
    jvm: &'static Jvm,
}

impl Worker for JbbWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let service = &self.jvm.service;
        // The thread is already attached, so this only reads thread-local
        // state; its local frame frees the two arrays' references on return.
        let out = self
            .jvm
            .vm
            .attach_current_thread(|env| -> jni::errors::Result<Vec<u8>> {
                let arr = env.byte_array_from_slice(req)?;
                let r = env
                    .call_static_method(
                        service,
                        jni_str!("handle"),
                        jni_sig!("([B)[B"),
                        &[JValue::Object(&arr)],
                    )?
                    .l()?;
                let r = env.cast_local::<JByteArray>(r)?;
                env.convert_byte_array(&r)
            })
            .map_err(|e| engine(format!("Service.handle failed: {e}")))?;
        match out.split_first() {
            Some((0, text)) => {
                resp.extend_from_slice(text);
                Ok(())
            }
            Some((_, why)) => Err(AppError::Request(format!(
                "the service rejected the transaction: {}",
                String::from_utf8_lossy(why)
            ))),
            None => Err(engine("Service.handle returned an empty response")),
        }
    }
}
