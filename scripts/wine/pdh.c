/* pdh.dll for Wine 8.0, whose own has no processor counters and aborts the process in
 * PdhEnumObjectsW (an unimplemented stub), which sysinfo calls when those counters are
 * missing. Only for running Lull's Windows build under Wine in CI
 * (scripts/check-platforms.sh puts it beside the .exe): every query fails to open, so
 * sysinfo reports no CPU usage (0 %) there. Windows has the real one. */
#include <windows.h>

#define PDH_CSTATUS_NO_MACHINE ((LONG)0x800007D0L)

__declspec(dllexport) LONG WINAPI PdhOpenQueryW(LPCWSTR source, DWORD_PTR user, HANDLE *query) {
    (void)source; (void)user;
    if (query) *query = NULL;
    return PDH_CSTATUS_NO_MACHINE;
}
__declspec(dllexport) LONG WINAPI PdhEnumObjectsW(LPCWSTR a, LPCWSTR b, LPWSTR c, LPDWORD d, DWORD e, BOOL f) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f;
    return PDH_CSTATUS_NO_MACHINE;
}
__declspec(dllexport) LONG WINAPI PdhAddEnglishCounterW(HANDLE q, LPCWSTR path, DWORD_PTR user, HANDLE *counter) {
    (void)q; (void)path; (void)user;
    if (counter) *counter = NULL;
    return PDH_CSTATUS_NO_MACHINE;
}
__declspec(dllexport) LONG WINAPI PdhCloseQuery(HANDLE q) { (void)q; return 0; }
__declspec(dllexport) LONG WINAPI PdhCollectQueryData(HANDLE q) { (void)q; return PDH_CSTATUS_NO_MACHINE; }
__declspec(dllexport) LONG WINAPI PdhGetFormattedCounterValue(HANDLE c, DWORD fmt, LPDWORD type, void *value) {
    (void)c; (void)fmt; (void)type; (void)value;
    return PDH_CSTATUS_NO_MACHINE;
}
__declspec(dllexport) LONG WINAPI PdhRemoveCounter(HANDLE c) { (void)c; return 0; }
