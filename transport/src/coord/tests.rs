use super::*;

#[test]
fn several_clients_records_merge_in_intended_order() {
    // id,worker,intended,sent,enqueued,started,finished,completed,measured
    let line = |id: u64, t: u64, m: u64| {
        format!("{id},0,{t},{},{},{},{},{},{m},{},{}", t + 1, t + 1, t + 2, t + 3, t + 9, t + 1, t + 9)
    };
    let a = vec![line(0, 100, 0), line(1, 300, 1), line(2, 500, 1)];
    let b = vec![line(0, 200, 0), line(1, 400, 1)];
    let rows = |v: &[String]| v.iter().map(|l| parse_req(l).unwrap()).collect::<Vec<_>>();
    let rec = records_of(&[rows(&a), rows(&b)]);
    let got: Vec<(u64, u64, bool)> = rec.iter().map(|x| (x.0, x.3.intended, x.2)).collect();
    assert_eq!(got, vec![(0, 100, false), (1, 200, false), (2, 300, true), (3, 400, true), (4, 500, true)]);
    // One client keeps its ids, holes included.
    let rec = records_of(&[rows(&[a[0].clone(), a[2].clone()])]);
    let ids: Vec<u64> = rec.iter().map(|x| x.0).collect();
    assert_eq!(ids, vec![0, 2]);
    assert!(parse_req("1,2,3").is_err());
    assert!(parse_req(&format!("{},12", a[0])).is_err());
}

/// Several clients' rows (a fan-out's leaves') go to either format as the same rows, and
/// the CSV is the lines it always was: the client's own values, then its number.
#[test]
fn several_clients_rows_are_the_same_in_csv_and_parquet() {
    let row = |id: u64, t: u64| -> ReqRow { [id, 1, t, t + 1, t + 2, t + 3, t + 5, t + 9, id % 2, t + 2, t + 10] };
    let reqs = vec![vec![row(0, 100), row(1, 300)], vec![row(0, 200)]];
    let dir = std::env::temp_dir().join(format!("taillab-coord-req-{}", std::process::id()));
    for sender in [Sender::Client, Sender::Leaf] {
        let mut read = Vec::new();
        for f in [RequestFormat::Csv, RequestFormat::Parquet] {
            let _ = std::fs::remove_dir_all(&dir);
            write_requests(&dir, f, &reqs, sender).unwrap();
            read.push(reqfile::read_all(&dir.join(reqfile::file_name(f))).unwrap());
            if f == RequestFormat::Csv {
                let mut want = format!("{},{sender}\n", taillab_core::summary::REQUESTS_CSV_HEADER);
                for (i, rows) in reqs.iter().enumerate() {
                    for r in rows {
                        let v: Vec<String> = r.iter().map(u64::to_string).collect();
                        want += &format!("{},{i}\n", v.join(","));
                    }
                }
                assert_eq!(std::fs::read_to_string(dir.join("requests.csv")).unwrap(), want);
            }
        }
        assert_eq!(read[0], read[1], "{sender}");
        let (extra, rows) = &read[0];
        assert_eq!(extra.sender, Some(sender));
        let got: Vec<(u64, u64, Option<u64>)> = rows.iter().map(|r| (r.id, r.stamps.intended, r.sender)).collect();
        assert_eq!(got, vec![(0, 100, Some(0)), (1, 300, Some(0)), (0, 200, Some(1))]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bounds_split_exactly() {
    let total: u64 = (0..3)
        .map(|i| match split_bound(Bound::Requests(10), 3, i) {
            Bound::Requests(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(total, 10);
    assert_eq!(split_bound(Bound::Seconds(2.0), 3, 1), Bound::Seconds(2.0));
}
