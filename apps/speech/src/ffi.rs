//! A small hand-written binding to PocketSphinx 0.8 (the Debian `5prealpha`
//! build): only the calls the app needs, wrapped in a [`Decoder`] that owns
//! one `ps_decoder_t` and frees it on drop.
//!
//! One decoder is used by one thread at a time (it is `Send`, not `Sync`);
//! each worker builds its own, so decoding never takes a lock.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::Mutex;

#[allow(non_camel_case_types)]
type ps_decoder_t = c_void;
#[allow(non_camel_case_types)]
type cmd_ln_t = c_void;
#[allow(non_camel_case_types)]
type arg_t = c_void;

extern "C" {
    fn ps_args() -> *const arg_t;
    fn cmd_ln_parse_r(
        inout: *mut cmd_ln_t,
        defn: *const arg_t,
        argc: i32,
        argv: *const *const c_char,
        strict: c_int,
    ) -> *mut cmd_ln_t;
    fn cmd_ln_free_r(cmdln: *mut cmd_ln_t) -> c_int;
    fn ps_init(config: *mut cmd_ln_t) -> *mut ps_decoder_t;
    fn ps_free(ps: *mut ps_decoder_t) -> c_int;
    fn ps_set_jsgf_file(ps: *mut ps_decoder_t, name: *const c_char, path: *const c_char) -> c_int;
    fn ps_set_search(ps: *mut ps_decoder_t, name: *const c_char) -> c_int;
    fn ps_start_utt(ps: *mut ps_decoder_t) -> c_int;
    fn ps_process_raw(
        ps: *mut ps_decoder_t,
        data: *const i16,
        n_samples: usize,
        no_search: c_int,
        full_utt: c_int,
    ) -> c_int;
    fn ps_end_utt(ps: *mut ps_decoder_t) -> c_int;
    fn ps_get_hyp(ps: *mut ps_decoder_t, out_best_score: *mut i32) -> *const c_char;
    fn err_set_logfp(stream: *mut libc::FILE);
}

/// Decoder construction reads and parses files through sphinxbase code
/// (JSGF parser, logging setup) that was not written with concurrent callers
/// in mind; decoding itself touches only the decoder's own state. Workers are
/// built once per run, so serialising construction costs nothing measurable.
static INIT: Mutex<()> = Mutex::new(());

/// Failure inside PocketSphinx; the string says which call and on what.
#[derive(Debug)]
pub struct PsError(pub String);

/// What the decoder is built with: the acoustic model, the dictionary, the
/// statistical language model (the default search) and named JSGF grammars.
#[derive(Debug, Clone)]
pub struct DecoderConfig {
    /// Folder of the acoustic model (`-hmm`).
    pub hmm: String,
    /// Pronunciation dictionary file (`-dict`).
    pub dict: String,
    /// The statistical LM (its search is [`Decoder::LM_SEARCH`]); None for a
    /// grammar-only decoder.
    pub lm: Option<String>,
    /// `(search name, grammar file)` pairs.
    pub grammars: Vec<(String, String)>,
    /// Further `(-flag, value)` decoder arguments (e.g. `-wip`).
    pub extra: Vec<(String, String)>,
}

/// One PocketSphinx decoder with its searches loaded, freed on drop.
pub struct Decoder {
    ps: *mut ps_decoder_t,
    config: *mut cmd_ln_t,
    /// Name of the active search, so switching is skipped when unchanged.
    current: String,
}

// SAFETY: the decoder owns all its state; it is moved between threads at most
// (built on the worker thread, used only there), never shared.
unsafe impl Send for Decoder {}

fn cstr(s: &str) -> Result<CString, PsError> {
    CString::new(s).map_err(|_| PsError(format!("path or name contains a NUL byte: {s:?}")))
}

impl Decoder {
    /// Name of the search made from the `-lm` argument.
    pub const LM_SEARCH: &'static str = "_default";

    /// Builds a decoder from `cfg`, starting on the LM search (or the first
    /// grammar). Fails when a model file is missing, an argument is rejected
    /// or a grammar does not load.
    pub fn new(cfg: &DecoderConfig) -> Result<Self, PsError> {
        for p in [Some(&cfg.hmm), Some(&cfg.dict), cfg.lm.as_ref()]
            .into_iter()
            .flatten()
        {
            if !Path::new(p).exists() {
                return Err(PsError(format!(
                    "model file {p} is missing (install pocketsphinx-en-us)"
                )));
            }
        }
        let _guard = INIT.lock().unwrap_or_else(|e| e.into_inner());
        let mut args: Vec<(String, String)> = vec![
            ("-hmm".into(), cfg.hmm.clone()),
            ("-dict".into(), cfg.dict.clone()),
            ("-logfn".into(), "/dev/null".into()),
        ];
        if let Some(lm) = &cfg.lm {
            args.push(("-lm".into(), lm.clone()));
        }
        args.extend(cfg.extra.iter().cloned());
        let owned: Vec<CString> = args
            .iter()
            .flat_map(|(k, v)| [cstr(k), cstr(v)])
            .collect::<Result<_, _>>()?;
        let argv: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        // SAFETY: argv points into `owned`, alive for the call (sphinxbase
        // copies the strings); the decoder pointers are checked before use.
        unsafe {
            // The decoder logs every utterance to stderr; that would swamp the
            // harness output and cost time on the measured path.
            err_set_logfp(std::ptr::null_mut());
            let config = cmd_ln_parse_r(
                std::ptr::null_mut(),
                ps_args(),
                argv.len() as i32,
                argv.as_ptr(),
                1,
            );
            if config.is_null() {
                return Err(PsError(format!(
                    "PocketSphinx rejected the decoder arguments {args:?}"
                )));
            }
            let ps = ps_init(config);
            if ps.is_null() {
                cmd_ln_free_r(config);
                return Err(PsError(format!(
                    "ps_init failed with model {} and dictionary {}",
                    cfg.hmm, cfg.dict
                )));
            }
            let mut d = Decoder {
                ps,
                config,
                current: String::new(),
            };
            for (name, path) in &cfg.grammars {
                let (n, p) = (cstr(name)?, cstr(path)?);
                if ps_set_jsgf_file(d.ps, n.as_ptr(), p.as_ptr()) < 0 {
                    return Err(PsError(format!(
                        "grammar {path} did not load (a word missing from the dictionary?)"
                    )));
                }
            }
            // Adding a grammar does not activate it; start on a known search.
            let first = match (&cfg.lm, cfg.grammars.first()) {
                (Some(_), _) => Self::LM_SEARCH,
                (None, Some((name, _))) => name.as_str(),
                (None, None) => return Err(PsError("a decoder needs an LM or a grammar".into())),
            };
            d.select(first)?;
            Ok(d)
        }
    }

    /// Activates the named search (the LM or a grammar) for the next utterance.
    pub fn select(&mut self, search: &str) -> Result<(), PsError> {
        if self.current == search {
            return Ok(());
        }
        let n = cstr(search)?;
        // SAFETY: valid decoder and C string.
        if unsafe { ps_set_search(self.ps, n.as_ptr()) } < 0 {
            return Err(PsError(format!(
                "no search named `{search}` in this decoder"
            )));
        }
        self.current = search.to_string();
        Ok(())
    }

    /// Decodes one whole utterance (16 kHz mono 16-bit samples) with the
    /// active search and returns the hypothesis ("" when nothing was heard).
    pub fn decode(&mut self, samples: &[i16]) -> Result<String, PsError> {
        // SAFETY: valid decoder; the sample slice outlives the call.
        unsafe {
            if ps_start_utt(self.ps) < 0 {
                return Err(PsError("ps_start_utt failed".into()));
            }
            // full_utt = 1: the whole utterance is here, which lets the decoder
            // normalise cepstra over all of it (as the batch decoder does).
            if ps_process_raw(self.ps, samples.as_ptr(), samples.len(), 0, 1) < 0 {
                ps_end_utt(self.ps);
                return Err(PsError("ps_process_raw failed".into()));
            }
            if ps_end_utt(self.ps) < 0 {
                return Err(PsError("ps_end_utt failed".into()));
            }
            let mut score = 0i32;
            let hyp = ps_get_hyp(self.ps, &mut score);
            if hyp.is_null() {
                return Ok(String::new());
            }
            Ok(CStr::from_ptr(hyp).to_string_lossy().into_owned())
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: both pointers came from ps_init / cmd_ln_init and are freed once.
        unsafe {
            ps_free(self.ps);
            cmd_ln_free_r(self.config);
        }
    }
}
