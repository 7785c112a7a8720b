//! The messages of the typed refusals of pageblock isolation
//! (mm/page_isolation.c's `-EBUSY`) and of contiguous allocation
//! (`alloc_contig_range()`'s `-EINVAL`/`-EBUSY`, `alloc_contig_pages()`'s
//! NULL): each names the frame or size at fault, in hex for a pfn.

use crate::{ContigError, IsolateError};
use mmlab_engine::Pfn;

/// `set_migratetype_isolate()` fails with `-EBUSY` in every case; the
/// message says which and names the frame (the pageblock's first one when
/// the whole pageblock is at fault).
#[test]
fn isolate_errors_name_the_frame_and_ebusy() {
    let cases = [
        (IsolateError::OutOfZone { pfn: Pfn(0x50000) }, "pfn 0x50000 is not in this zone (EBUSY)"),
        (IsolateError::AlreadyIsolated { pfn: Pfn(0x40200) }, "pageblock at 0x40200 is isolated already (EBUSY)"),
        (IsolateError::Unmovable { pfn: Pfn(0x40213) }, "unmovable page 0x40213 in the pageblock (EBUSY)"),
        (IsolateError::StraddlesZone { pfn: Pfn(0x43e00) }, "pageblock at 0x43e00 straddles the zone (EBUSY)"),
    ];
    for (e, msg) in cases {
        assert_eq!(e.to_string(), msg);
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(boxed.to_string(), msg);
    }
}

/// `alloc_contig_range()` / `alloc_contig_pages()` refusals: the range
/// asked for (first frame + pages), the busy frame, the size no range was
/// found for, `__GFP_COMP` on a range that is no aligned power of two, or
/// a CPU handle of another machine.
#[test]
fn contig_errors_name_the_range_or_frame() {
    let cases = [
        (
            ContigError::OutOfRange { start: Pfn(0x43f00), nr_pages: 512 },
            "contig range 0x43f00+512 is empty or outside the zone",
        ),
        (ContigError::Busy { pfn: Pfn(0x40007) }, "pfn 0x40007 in the range is in use"),
        (ContigError::NoRange { nr_pages: 262_144 }, "no free contiguous range of 262144 pages"),
        (
            ContigError::NotCompound { start: Pfn(0x40100), nr_pages: 768 },
            "contig range 0x40100+768 is not an aligned power of two (__GFP_COMP)",
        ),
        (ContigError::ForeignCpu { cpu: 3 }, "cpu 3 is a handle of another machine"),
    ];
    for (e, msg) in cases {
        assert_eq!(e.to_string(), msg);
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(boxed.to_string(), msg);
    }
}
