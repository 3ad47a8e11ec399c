//! What kind of request the client is sending: the write counter, the fence and the
//! fault injector each tell writes from reads, and the operator's own bookkeeping.

use http::Method;

/// A request that asks the API server to change something (anything but GET, HEAD, OPTIONS).
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A write about the operator's own standing rather than the objects it reconciles: its
/// Lease (renewal, release), and access reviews (POSTed, but they change nothing).
pub fn is_bookkeeping(path: &str) -> bool {
    let lease = path.starts_with("/apis/coordination.k8s.io/") && path.split('/').any(|s| s == "leases");
    lease || path.starts_with("/apis/authorization.k8s.io/")
}
