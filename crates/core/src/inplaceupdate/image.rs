//! Container image references compared as the kubelet reports them (Docker-style normalisation).

/// Docker-style reference normalisation for comparing spec and reported images: the kubelet reports
/// `docker.io/library/nginx:1.20.0` for `nginx:1.20.0`. Kruise only adds `:latest`; normalising both sides
/// keeps every Kruise "equal" equal and also accepts the kubelet's canonical form.
// The reference `images_equal` is checked against in the tests.
#[cfg(test)]
pub(crate) fn normalize_image(image: &str) -> String {
    let (domain, name, suffix) = normalized_parts(image);
    [domain, name, suffix].concat()
}

/// `normalize_image(a) == normalize_image(b)`, without building either string (the completion check
/// compares every in-flight container).
pub(crate) fn images_equal(a: &str, b: &str) -> bool {
    fn bytes<'s>((d, n, s): (&'s str, &'s str, &'s str)) -> impl Iterator<Item = u8> + 's {
        d.bytes().chain(n.bytes()).chain(s.bytes())
    }
    let (a, b) = (normalized_parts(a), normalized_parts(b));
    a.0.len() + a.1.len() + a.2.len() == b.0.len() + b.1.len() + b.2.len() && bytes(a).eq(bytes(b))
}

/// `normalize_image` in three pieces: the implied domain prefix, the name, and the tag or digest.
fn normalized_parts(image: &str) -> (&'static str, &str, &str) {
    let (name, suffix) = match image.find('@') {
        Some(i) => (&image[..i], &image[i..]),
        None => {
            let last_slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[last_slash..].rfind(':') {
                Some(j) => (&image[..last_slash + j], &image[last_slash + j..]),
                None => (image, ":latest"),
            }
        }
    };
    let first = name.split('/').next().unwrap_or("");
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let domain = if has_domain {
        ""
    } else if name.contains('/') {
        "docker.io/"
    } else {
        "docker.io/library/"
    };
    (domain, name, suffix)
}
