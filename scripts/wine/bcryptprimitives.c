/* bcryptprimitives.dll for Wine 8.0, which has none: Rust's std (1.78 and later) takes
 * its random bytes from ProcessPrng there. Only for running Lull's Windows build under
 * Wine in CI (scripts/check-platforms.sh puts it beside the .exe); Windows 10 and later
 * have the real one. ProcessPrng is answered from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine implements. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
