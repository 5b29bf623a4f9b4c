//! Apps this crate provides: `null` (an echo server, the null-RPC case of
//! Tales of the Tail) and the adapters for external servers (`memcached`,
//! `redis`, `http`), whose clients write requests in the server's own
//! protocol and whose server side is the real external program.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use taillab_core::app::{AppError, Client, DataCtx, KeySpec, Params, Server, Worker};
use taillab_core::App;

/// Every app of this crate, for the CLI registry.
pub fn apps() -> Vec<Arc<dyn App>> {
    vec![
        Arc::new(Null),
        Arc::new(External(Ext::Memcached)),
        Arc::new(External(Ext::Redis)),
        Arc::new(External(Ext::Http)),
        Arc::new(External(Ext::Grpc)),
    ]
}

const NULL_KEYS: &[KeySpec] = &[KeySpec { name: "size", default: "64", help: "request payload bytes (echoed back)" }];

/// Echoes the request: the harness's and transport's own cost, nothing else.
pub struct Null;

fn null_size(p: &Params) -> Result<usize, AppError> {
    let n: usize = p.get_parsed("size", 64, "a byte count in 0..=16777216")?;
    if n > 16 << 20 {
        return Err(AppError::BadParam {
            key: "size".into(),
            value: n.to_string(),
            expected: "a byte count in 0..=16777216".into(),
        });
    }
    Ok(n)
}

impl App for Null {
    fn name(&self) -> &'static str {
        "null"
    }
    fn about(&self) -> &'static str {
        "echo server: measures the harness and transport alone (null RPC)"
    }
    fn keys(&self) -> &'static [KeySpec] {
        NULL_KEYS
    }
    fn server(&self, _: &DataCtx, p: &Params, _threads: usize) -> Result<Arc<dyn Server>, AppError> {
        null_size(p)?;
        Ok(Arc::new(NullServer))
    }
    fn expected_service_ns(&self, _: &Params) -> Option<f64> {
        Some(0.0)
    }
    fn client(&self, _: &DataCtx, p: &Params, seed: u64) -> Result<Box<dyn Client>, AppError> {
        let size = null_size(p)?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let payload = (0..size).map(|_| rng.gen()).collect();
        Ok(Box::new(NullClient { payload }))
    }
}

struct NullServer;
impl Server for NullServer {
    fn worker(&self, _: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(NullWorker))
    }
}
struct NullWorker;
impl Worker for NullWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        resp.extend_from_slice(req);
        Ok(())
    }
}
struct NullClient {
    payload: Vec<u8>,
}
impl Client for NullClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.payload);
    }
}

/// Which external server an adapter drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext {
    /// memcached, text protocol (`get`/`set`).
    Memcached,
    /// redis-server, RESP (`GET`/`SET`).
    Redis,
    /// An HTTP server, keep-alive `GET` (HTTP/1.1, or HTTP/2 with `version=2`).
    Http,
    /// A gRPC server: unary calls of one method with one request message.
    Grpc,
}

/// An adapter app: taillab writes the external server's requests and reads its
/// responses; the server is the real program, started by the user (`taillab load --target`).
pub struct External(pub Ext);

const KV_KEYS: &[KeySpec] = &[
    KeySpec { name: "keys", default: "10000", help: "distinct keys" },
    KeySpec { name: "key_size", default: "16", help: "key length in bytes (8..=200)" },
    KeySpec { name: "value_size", default: "64", help: "value length of sets in bytes" },
    KeySpec { name: "get_ratio", default: "0.9", help: "fraction of requests that are gets (rest are sets)" },
    KeySpec { name: "zipf", default: "0.99", help: "Zipf exponent of key popularity (0 = uniform)" },
    KeySpec { name: "preload", default: "true", help: "set every key once before the run so gets hit" },
];
const HTTP_KEYS: &[KeySpec] = &[
    KeySpec { name: "path", default: "/", help: "path to GET (keep-alive)" },
    KeySpec { name: "host", default: "localhost", help: "Host header (HTTP/2: :authority)" },
    KeySpec {
        name: "version",
        default: "1.1",
        help: "HTTP version: 1.1, or 2 (cleartext with prior knowledge, or TLS with ALPN h2)",
    },
    KeySpec { name: "tls", default: "false", help: "HTTP/2 over TLS (version=2 only)" },
    KeySpec {
        name: "ca",
        default: "",
        help: "PEM file of CA certificates to trust with tls=true (default: the system's)",
    },
];
const GRPC_KEYS: &[KeySpec] = &[
    KeySpec { name: "method", default: "", help: "method path /package.Service/Method (required)" },
    KeySpec {
        name: "request",
        default: "",
        help: "the request message, serialized protobuf: a FILE, or hex:0a03616263 (default: the empty message)",
    },
    KeySpec { name: "authority", default: "", help: ":authority of each call (default: the target)" },
    KeySpec { name: "tls", default: "false", help: "TLS with ALPN h2 (default: cleartext HTTP/2, h2c)" },
    KeySpec {
        name: "ca",
        default: "",
        help: "PEM file of CA certificates to trust with tls=true (default: the system's)",
    },
];

/// Parsed key-value workload settings (memcached and redis).
#[derive(Debug, Clone)]
pub struct KvSpec {
    /// Distinct keys, 1..=100000000.
    pub keys: u64,
    /// Key length in bytes, 8..=200 (memcached allows at most 250).
    pub key_size: usize,
    /// Value length of sets in bytes, 0..=1 MiB.
    pub value_size: usize,
    /// Fraction of requests that are gets (the rest are sets), in [0, 1].
    pub get_ratio: f64,
    /// Zipf exponent of key popularity, ≥ 0 (0: uniform).
    pub zipf: f64,
    /// Set every key once before the run, so gets hit.
    pub preload: bool,
}

impl KvSpec {
    /// Reads and range-checks the `--set` keys; the error names the bad key and its range.
    pub fn from_params(p: &Params) -> Result<Self, AppError> {
        let bad =
            |key: &str, v: String, exp: &str| AppError::BadParam { key: key.into(), value: v, expected: exp.into() };
        let s = KvSpec {
            keys: p.get_parsed("keys", 10_000, "a key count ≥ 1")?,
            key_size: p.get_parsed("key_size", 16, "a key length in 8..=200")?,
            value_size: p.get_parsed("value_size", 64, "a value length in 0..=1048576")?,
            get_ratio: p.get_parsed("get_ratio", 0.9, "a fraction in [0,1]")?,
            zipf: p.get_parsed("zipf", 0.99, "a Zipf exponent ≥ 0")?,
            preload: p.get_parsed("preload", true, "true or false")?,
        };
        if s.keys == 0 || s.keys > 100_000_000 {
            return Err(bad("keys", s.keys.to_string(), "a key count in 1..=100000000"));
        }
        if !(8..=200).contains(&s.key_size) {
            return Err(bad(
                "key_size",
                s.key_size.to_string(),
                "a key length in 8..=200 (memcached keys are at most 250 bytes)",
            ));
        }
        if s.value_size > 1 << 20 {
            return Err(bad("value_size", s.value_size.to_string(), "a value length in 0..=1048576"));
        }
        if !(0.0..=1.0).contains(&s.get_ratio) {
            return Err(bad("get_ratio", s.get_ratio.to_string(), "a fraction in [0,1]"));
        }
        if !(s.zipf.is_finite() && s.zipf >= 0.0) {
            return Err(bad("zipf", s.zipf.to_string(), "a Zipf exponent ≥ 0"));
        }
        Ok(s)
    }

    /// Key number `i` (0-based) padded to `key_size` bytes.
    pub fn key(&self, i: u64, out: &mut Vec<u8>) {
        let digits = format!("{i}");
        out.extend_from_slice(b"k");
        out.extend(std::iter::repeat_n(b'0', self.key_size.saturating_sub(1 + digits.len())));
        out.extend_from_slice(digits.as_bytes());
    }
}

/// Writes a get or set of key `i` in the external server's protocol.
pub fn kv_request(ext: Ext, spec: &KvSpec, get: bool, i: u64, value: &[u8], out: &mut Vec<u8>) {
    let mut key = Vec::with_capacity(spec.key_size);
    spec.key(i, &mut key);
    match (ext, get) {
        (Ext::Memcached, true) => {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(&key);
            out.extend_from_slice(b"\r\n");
        }
        (Ext::Memcached, false) => {
            out.extend_from_slice(b"set ");
            out.extend_from_slice(&key);
            out.extend_from_slice(format!(" 0 0 {}\r\n", value.len()).as_bytes());
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        (_, true) => {
            out.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n", key.len()).as_bytes());
            out.extend_from_slice(&key);
            out.extend_from_slice(b"\r\n");
        }
        (_, false) => {
            out.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).as_bytes());
            out.extend_from_slice(&key);
            out.extend_from_slice(format!("\r\n${}\r\n", value.len()).as_bytes());
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The requests that set every key once (the `preload` setting).
pub fn kv_preload(ext: Ext, spec: &KvSpec) -> Vec<Vec<u8>> {
    if !spec.preload {
        return Vec::new();
    }
    let value = vec![b'v'; spec.value_size];
    (0..spec.keys)
        .map(|i| {
            let mut v = Vec::new();
            kv_request(ext, spec, false, i, &value, &mut v);
            v
        })
        .collect()
}

struct KvClient {
    ext: Ext,
    spec: KvSpec,
    rng: Xoshiro256PlusPlus,
    zipf: Option<Zipf<f64>>,
    value: Vec<u8>,
}

impl Client for KvClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let i = match &self.zipf {
            // Zipf draws 1..=n, rank 1 the most popular.
            Some(z) => (z.sample(&mut self.rng) as u64).clamp(1, self.spec.keys) - 1,
            None => self.rng.gen_range(0..self.spec.keys),
        };
        let get = self.rng.gen::<f64>() < self.spec.get_ratio;
        kv_request(self.ext, &self.spec, get, i, &self.value, out);
    }
}

struct HttpClient {
    req: Vec<u8>,
}

/// The same request message every call (a gRPC server's latency is what is measured).
struct GrpcClient {
    msg: Vec<u8>,
}
impl Client for GrpcClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.msg);
    }
}

fn bad(key: &str, value: &str, expected: impl Into<String>) -> AppError {
    AppError::BadParam { key: key.into(), value: value.into(), expected: expected.into() }
}

/// The HTTP/2 run `app` makes with `p`: gRPC always, `http` with
/// `version=2`; `None` for every other app (they speak over plain TCP).
pub fn h2_spec(app: &str, p: &Params) -> Result<Option<crate::http2::H2Spec>, AppError> {
    use crate::http2::{H2Kind, H2Spec};
    use crate::tls::TlsSpec;
    let tls_on: bool = p.get_parsed("tls", false, "true or false")?;
    let tls = tls_on.then(|| TlsSpec { ca: p.get("ca").filter(|c| !c.is_empty()).map(Into::into) });
    if tls.is_none() && p.get("ca").is_some_and(|c| !c.is_empty()) {
        return Err(bad("ca", p.get("ca").unwrap_or(""), "a CA file only with tls=true"));
    }
    match app {
        "grpc" => {
            let method = p.get("method").unwrap_or("");
            if method.is_empty() {
                return Err(bad("method", "", "a gRPC method path: --set method=/package.Service/Method"));
            }
            crate::grpc::check_method(method).map_err(|e| bad("method", method, e))?;
            let authority = p.get("authority").filter(|a| !a.is_empty()).map(Into::into);
            Ok(Some(H2Spec { kind: H2Kind::Grpc { method: method.into() }, authority, tls }))
        }
        "http" => match p.get("version").unwrap_or("1.1") {
            "1.1" | "1" => {
                if tls_on {
                    return Err(bad("tls", "true", "TLS only with version=2 (HTTP/1.1 runs are cleartext)"));
                }
                Ok(None)
            }
            "2" | "2.0" => {
                let path = http_path(p)?;
                let authority = p.get("host").map(Into::into);
                Ok(Some(H2Spec { kind: H2Kind::Get { path }, authority, tls }))
            }
            v => Err(bad("version", v, "1.1 or 2")),
        },
        _ => Ok(None),
    }
}
impl Client for HttpClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.req);
    }
}

fn http_path(p: &Params) -> Result<String, AppError> {
    let path = p.get("path").unwrap_or("/");
    if !path.starts_with('/') || path.bytes().any(|c| c.is_ascii_whitespace() || c.is_ascii_control()) {
        return Err(bad("path", path, "an absolute path like /index.html without spaces"));
    }
    Ok(path.into())
}

fn http_request(p: &Params) -> Result<Vec<u8>, AppError> {
    let path = http_path(p)?;
    let host = p.get("host").unwrap_or("localhost");
    if host.is_empty() || host.bytes().any(|c| c.is_ascii_whitespace() || c.is_ascii_control()) {
        return Err(AppError::BadParam {
            key: "host".into(),
            value: host.into(),
            expected: "a host name without spaces".into(),
        });
    }
    Ok(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes())
}

impl External {
    fn program(&self) -> (&'static str, &'static str) {
        match self.0 {
            Ext::Memcached => ("memcached", "11211"),
            Ext::Redis => ("redis-server", "6379"),
            Ext::Http => ("an HTTP server such as nginx", "80"),
            Ext::Grpc => ("a gRPC server", "50051"),
        }
    }
}

impl App for External {
    fn name(&self) -> &'static str {
        match self.0 {
            Ext::Memcached => "memcached",
            Ext::Redis => "redis",
            Ext::Http => "http",
            Ext::Grpc => "grpc",
        }
    }
    fn about(&self) -> &'static str {
        match self.0 {
            Ext::Memcached => {
                "external memcached (text protocol get/set, Zipf keys); `taillab load --target`; sojourn only"
            }
            Ext::Redis => "external redis-server (RESP GET/SET, Zipf keys); `taillab load --target`; sojourn only",
            Ext::Http => {
                "external HTTP server (keep-alive GET; HTTP/1.1, or HTTP/2 with version=2); `taillab load --target`; sojourn only"
            }
            Ext::Grpc => {
                "external gRPC server (unary calls of one method, raw protobuf bytes, h2c or TLS); `taillab load --target`; sojourn only"
            }
        }
    }
    fn keys(&self) -> &'static [KeySpec] {
        match self.0 {
            Ext::Http => HTTP_KEYS,
            Ext::Grpc => GRPC_KEYS,
            _ => KV_KEYS,
        }
    }
    fn server(&self, _: &DataCtx, _: &Params, _: usize) -> Result<Arc<dyn Server>, AppError> {
        let (prog, port) = self.program();
        Err(AppError::Engine {
            engine: self.name().into(),
            why: format!(
                "`{}` is an external server that taillab drives but does not host: start {prog} yourself and run `taillab load --app {} --target HOST:{port}`",
                self.name(),
                self.name()
            ),
        })
    }
    fn client(&self, _: &DataCtx, p: &Params, seed: u64) -> Result<Box<dyn Client>, AppError> {
        match self.0 {
            Ext::Http => return Ok(Box::new(HttpClient { req: http_request(p)? })),
            Ext::Grpc => {
                h2_spec("grpc", p)?;
                let msg = match p.get("request").filter(|r| !r.is_empty()) {
                    Some(r) => crate::grpc::request_message(r).map_err(|e| bad("request", r, e))?,
                    None => Vec::new(),
                };
                return Ok(Box::new(GrpcClient { msg }));
            }
            _ => {}
        }
        let spec = KvSpec::from_params(p)?;
        let zipf = (spec.zipf > 0.0).then(|| Zipf::new(spec.keys, spec.zipf).expect("validated n ≥ 1, s > 0"));
        let value = vec![b'v'; spec.value_size];
        Ok(Box::new(KvClient { ext: self.0, spec, rng: Xoshiro256PlusPlus::seed_from_u64(seed), zipf, value }))
    }
}

/// The client-side protocol for `app` (taillab frames unless it is an adapter).
pub fn wire_for(app: &str, params: &Params, max_frame: u32) -> Result<Arc<dyn crate::wire::Wire>, AppError> {
    use crate::wire::*;
    Ok(match app {
        "memcached" => Arc::new(MemcachedWire { preload: kv_preload(Ext::Memcached, &KvSpec::from_params(params)?) }),
        "redis" => Arc::new(RedisWire { preload: kv_preload(Ext::Redis, &KvSpec::from_params(params)?) }),
        "grpc" | "http" if h2_spec(app, params)?.is_some() => {
            Arc::new(crate::http2::H2Wire { name: app_wire_name(app) })
        }
        "http" => {
            http_request(params)?;
            Arc::new(HttpWire)
        }
        _ => Arc::new(TaillabWire { max_frame }),
    })
}

fn app_wire_name(app: &str) -> &'static str {
    if app == "grpc" {
        "grpc"
    } else {
        "http2"
    }
}

/// True for apps whose server is an external program.
pub fn is_external(app: &str) -> bool {
    matches!(app, "memcached" | "redis" | "http" | "grpc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_requests_are_well_formed_and_seeded() {
        let p = Params::parse(["keys=100", "key_size=10", "value_size=3", "get_ratio=0.5"]).unwrap();
        let app = External(Ext::Redis);
        let mut a = app.client(&DataCtx::from_env(), &p, 7).unwrap();
        let mut b = app.client(&DataCtx::from_env(), &p, 7).unwrap();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let mut sets = 0;
        for _ in 0..200 {
            x.clear();
            y.clear();
            a.next_request(&mut x);
            b.next_request(&mut y);
            assert_eq!(x, y);
            sets += x.starts_with(b"*3") as u32;
            let w = crate::wire::RedisWire { preload: vec![] };
            use crate::wire::Wire;
            // A request is itself one RESP array: the response parser accepts it whole.
            assert_eq!(w.decode(&x).unwrap().unwrap().consumed, x.len());
        }
        assert!((50..150).contains(&sets), "get_ratio 0.5 gave {sets} sets of 200");
        let mut k = Vec::new();
        KvSpec::from_params(&p).unwrap().key(42, &mut k);
        assert_eq!(k, b"k000000042");
        assert!(KvSpec::from_params(&Params::parse(["key_size=300"]).unwrap()).is_err());
        assert!(app.server(&DataCtx::from_env(), &p, 1).err().unwrap().to_string().contains("taillab load"));
    }

    #[test]
    fn zipf_keys_favour_low_ranks() {
        let p = Params::parse(["keys=1000", "zipf=1.2", "get_ratio=1"]).unwrap();
        let mut c = External(Ext::Memcached).client(&DataCtx::from_env(), &p, 1).unwrap();
        let mut hot = 0;
        let mut v = Vec::new();
        let mut want = b"get ".to_vec();
        KvSpec::from_params(&p).unwrap().key(0, &mut want);
        want.extend_from_slice(b"\r\n");
        for _ in 0..1000 {
            v.clear();
            c.next_request(&mut v);
            hot += (v == want) as u32;
        }
        assert!(hot > 100, "key 0 drawn {hot} times of 1000 with zipf 1.2");
    }
}
