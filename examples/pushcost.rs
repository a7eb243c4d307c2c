//! scratch
use chronopool::ScheduledExecutor;
use std::sync::{Arc, Barrier};
use std::time::Instant;
fn main() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    for round in 0..4 {
        let start = Arc::new(Barrier::new(3));
        let end = Arc::new(Barrier::new(3));
        for _ in 0..2 {
            let (s, e) = (start.clone(), end.clone());
            pool.execute(move || {
                s.wait();
                e.wait();
            })
            .unwrap();
        }
        start.wait();
        let n = 200_000;
        let t = Instant::now();
        for _ in 0..n {
            pool.execute(|| {}).unwrap();
        }
        println!(
            "round {round}: push with busy workers: {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        end.wait();
        pool.submit(|| ()).unwrap().join().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let inj = crossbeam_deque::Injector::new();
    for round in 0..3 {
        let n = 200_000;
        let t = Instant::now();
        for _ in 0..n {
            inj.push((std::ptr::null::<u8>() as usize, 0usize));
        }
        println!(
            "raw injector 16B push: {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        while !inj.steal().is_empty() {}
        let _ = round;
    }
}
