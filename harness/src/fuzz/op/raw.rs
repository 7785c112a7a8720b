//! The text of the calls that reach the page tables and the I/O mappings
//! below vmalloc's own calls. Each is made as a wrong call only (the
//! executor skips an instance that would change the machine):
//!
//! ```text
//! cpu0 map_range p4 va=t3 expect=BreakBeforeMake
//! cpu1 map_range p4.2 va=0x1000 expect=OutsideAddressSpace
//! cpu0 set_cont_ptes ptep=0x1000 va=0xffff800008000000 pa=0x40000000 expect=OutsideRam
//! cpu0 set_cont_ptes ptep=0x1000 va=0xffff800008001000 pa=0x40000000 expect=ContAlignment
//! cpu2 pci_remap_iospace port=0x10000 size=0x2000 phys=0x10010000 -> t8
//! cpu1 pci_remap_iospace port=0x10000 size=0x1000 phys=0x40000000 expect=Map -> t9
//! cpu3 dma_common_contiguous_remap p9 count=4 expect=PageNotAllocated
//! ```
//!
//! `map_range ... va=` maps a page reference's block (as `map_range` does)
//! at the address of a live mapping (`tH`, `tH+K`) or a raw one; without
//! `va=` it is the right call, which binds a `t` handle.

use super::{Args, Call, HandleKind, ParseOpError, Ref, err, parse_num, parse_ref};
use std::fmt;

impl Call {
    /// The arguments of a raw call, after its name (methods, not free
    /// functions, so that `op` names nothing of this module).
    pub(super) fn fmt_raw_args(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::MapRangeAt { page, va } => {
                super::target(f, "pfn", page)?;
                write!(f, " va={va}")
            }
            Call::SetContPtes { ptep, va, pa } => write!(f, " ptep={ptep:#x} va={va:#x} pa={pa:#x}"),
            Call::PciRemapIospace { port, size, phys, .. } => {
                write!(f, " port={port:#x} size={size:#x} phys={phys:#x}")
            }
            Call::DmaRemap { page, count } => {
                super::target(f, "pfn", page)?;
                write!(f, " count={count}")
            }
            _ => Ok(()),
        }
    }
}

impl Args<'_> {
    /// Parse the arguments of the raw call `name` (`map_range` with `va=`).
    pub(super) fn raw_call(&mut self, name: &str) -> Result<Call, ParseOpError> {
        Ok(match name {
            "map_range" => {
                let page = self.target("pfn")?;
                let va = self.take("va")?;
                // A number is a raw address; anything else a mapping's reference.
                let va = if va.starts_with(|c: char| c.is_ascii_digit()) {
                    Ref::Raw(parse_num(va)?)
                } else {
                    parse_ref(va)?
                };
                Call::MapRangeAt { page, va }
            }
            "set_cont_ptes" => Call::SetContPtes { ptep: self.num("ptep")?, va: self.num("va")?, pa: self.num("pa")? },
            "pci_remap_iospace" => Call::PciRemapIospace {
                port: self.num("port")?,
                size: self.num("size")?,
                phys: self.num("phys")?,
                out: self.out(HandleKind::Table)?,
            },
            "dma_common_contiguous_remap" => Call::DmaRemap { page: self.target("pfn")?, count: self.num("count")? },
            _ => return err(format!("unknown call `{name}`")),
        })
    }
}
