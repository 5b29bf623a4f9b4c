//! The app registry: every app the binary was built with.
//!
//! Heavy engines are cargo features of this crate (on by default), so a build
//! can leave an app out: `cargo build --no-default-features --features kv`.

use std::sync::Arc;
use taillab_core::App;

/// All apps compiled into this binary, in the order `taillab apps` lists them.
pub fn all() -> Vec<Arc<dyn App>> {
    #[allow(unused_mut)]
    let mut v: Vec<Arc<dyn App>> = vec![taillab_synth::app()];
    // null (echo) and the external-server adapters: part of the transport, not engines.
    v.extend(taillab_transport::apps());
    #[cfg(feature = "kv")]
    v.push(taillab_kv::app());
    #[cfg(feature = "search")]
    v.push(taillab_search::app());
    #[cfg(feature = "oltp")]
    v.extend(taillab_oltp::apps());
    #[cfg(feature = "speech")]
    v.push(taillab_speech::app());
    #[cfg(feature = "middleware")]
    v.push(taillab_middleware::app());
    #[cfg(feature = "img-dnn")]
    v.push(taillab_img_dnn::app());
    #[cfg(feature = "translate")]
    v.push(taillab_translate::app());
    v
}

/// Looks an app up by name; the error lists the ones that exist.
pub fn find(name: &str) -> anyhow::Result<Arc<dyn App>> {
    let apps = all();
    let names: Vec<&str> = apps.iter().map(|a| a.name()).collect();
    apps.iter()
        .find(|a| a.name() == name)
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown app `{name}`; available: {} (see `taillab apps`)",
                names.join(", ")
            )
        })
}
