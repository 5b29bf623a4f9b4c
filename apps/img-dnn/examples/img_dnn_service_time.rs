//! Service time of the img-dnn app on one worker, until the harness runs it.
//!
//! `cargo run --release -p taillab-img-dnn --example img_dnn_service_time -- [N] [dataset] [model]`
//! prepares the data (in `$TAILLAB_DATA`), draws N test images with seed 1,
//! calls `Worker::handle` back to back and prints percentiles of the time
//! per call.

use taillab_core::app::{service_line, time_handles, DataCtx, Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .first()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000);
    let dataset = args.get(1).cloned().unwrap_or_else(|| "mnist".into());
    let model = args.get(2).cloned().unwrap_or_else(|| "sae".into());
    let data = DataCtx::from_env();
    let app = taillab_img_dnn::app();
    let params = Params::parse([
        format!("dataset={dataset}").as_str(),
        format!("model={model}").as_str(),
    ])?;
    app.prepare(&data, &params)?;
    let server = app.server(&data, &params, 1)?;
    let mut w = server.worker(0)?;
    let mut client = app.client(&data, &params, 1)?;
    // 100 untimed calls: the first touches 30 MB of weights for the first time.
    let ns = time_handles(w.as_mut(), client.as_mut(), 100, n, |_| {})?;
    println!(
        "img-dnn dataset={dataset} model={model} n={n}: {}",
        service_line(&ns)
    );
    println!("{}", server.report());
    Ok(())
}
