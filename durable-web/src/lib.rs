//! A web dashboard for [chronopool-durable](chronopool_durable): what
//! operators of job systems use in Oban Web, River UI or Sidekiq's
//! dashboard, on either store.
//!
//! * **Overview**: jobs by state, the last hour's runs and failures, the
//!   most late jobs, paused handlers and limits.
//! * **Jobs**: filtered by state, handler, key prefix and pause, by next
//!   fire time, a page at a time.
//! * **A job**: its schedule, state, payload, last error and the history of
//!   its runs, with buttons for the verbs (pause, resume, run now, retry,
//!   cancel; pause and resume a handler), each behind a confirmation page,
//!   every change made through the library.
//!
//! Mount it in an application (hand it each request below its prefix:
//! [`Dashboard::handle`]) or serve it alone ([`Dashboard::serve`], or
//! `chronopool-durable serve` from the CLI). It binds where it is told
//! (localhost by default in the CLI), takes an optional access token, and
//! treats every stored string (keys, handler names, payloads, errors) as
//! untrusted: the pages are built with `maud`, which escapes every value,
//! carry a content security policy that runs no script, and accept a
//! change only from their own forms (a CSRF token).
#![warn(missing_docs, missing_debug_implementations)]

mod auth;
mod dashboard;
mod http;
mod pages;
mod server;

pub use dashboard::Dashboard;
pub use http::{Request, Response};
pub use server::Server;
