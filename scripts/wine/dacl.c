/* dacl.exe: prints the current user's SID, then each argument's owner and access control
 * list in SDDL as Windows reads them back (GetNamedSecurityInfoW), one "name<TAB>text"
 * line each; exit 1 when one cannot be read. scripts/check-platforms.sh builds it with
 * mingw-w64 and checks, under Wine, that the files and directories the agent wrote grant
 * their owner (and SYSTEM) alone. Only for that check. */
#include <windows.h>
#include <sddl.h>
#include <aclapi.h>
#include <stdio.h>

static int user_sid(void) {
    HANDLE token;
    BYTE buf[512];
    DWORD len = 0;
    LPWSTR text = NULL;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) return 0;
    if (!GetTokenInformation(token, TokenUser, buf, sizeof buf, &len)) return 0;
    if (!ConvertSidToStringSidW(((TOKEN_USER *)buf)->User.Sid, &text)) return 0;
    wprintf(L"user\t%ls\n", text);
    LocalFree(text);
    CloseHandle(token);
    return 1;
}

int wmain(int argc, wchar_t **argv) {
    int ok = user_sid();
    for (int i = 1; i < argc; i++) {
        PSECURITY_DESCRIPTOR sd = NULL;
        LPWSTR text = NULL;
        SECURITY_INFORMATION what = OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
        DWORD err = GetNamedSecurityInfoW(argv[i], SE_FILE_OBJECT, what, NULL, NULL, NULL, NULL, &sd);
        if (err != ERROR_SUCCESS || !ConvertSecurityDescriptorToStringSecurityDescriptorW(sd, SDDL_REVISION_1, what, &text, NULL)) {
            wprintf(L"%ls\terror %lu\n", argv[i], err ? err : GetLastError());
            ok = 0;
        } else {
            wprintf(L"%ls\t%ls\n", argv[i], text);
        }
        LocalFree(text);
        LocalFree(sd);
    }
    return ok ? 0 : 1;
}
