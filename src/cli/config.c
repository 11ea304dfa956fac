/* config.c - CLI settings from the environment and ~/.config/fairgpu (see config.h). */
#include "cli/config.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *fg_cli_config_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    char buf[4096];
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(buf, sizeof buf, "%s/fairgpu/config.json", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return NULL;
        n = snprintf(buf, sizeof buf, "%s/.config/fairgpu/config.json", home);
    }
    if (n < 0 || (size_t)n >= sizeof buf)
        return NULL;
    return fg_xstrdup(buf);
}

char *fg_cli_normalize_url(const char *url)
{
    char *u = fg_xstrdup(url);
    size_t n = strlen(u);
    while (n > 0 && u[n - 1] == '/')
        u[--n] = '\0';
    return u;
}

static char *str_member(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) && json_string_length(v) ? fg_xstrdup(json_string_value(v)) : NULL;
}

int fg_cli_config_load(fg_cli_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char *furl = NULL, *ftoken = NULL, *fca = NULL;
    char *path = fg_cli_config_path();
    int rc = 0;
    if (path) {
        FILE *f = fopen(path, "r");
        if (f) {
            json_error_t je;
            json_t *o = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
            fclose(f);
            if (!o || !json_is_object(o)) {
                fprintf(stderr, "fairgpu: %s: not a valid config file (%s); run 'fairgpu login'\n",
                        path, o ? "not an object" : je.text);
                rc = -1;
            } else {
                furl = str_member(o, "url");
                ftoken = str_member(o, "token");
                cfg->username = str_member(o, "username");
                fca = str_member(o, "ca_file");
            }
            json_decref(o);
        } else if (errno != ENOENT) {
            fprintf(stderr, "fairgpu: cannot read %s: %s\n", path, strerror(errno));
            rc = -1;
        }
    }
    free(path);
    const char *eu = getenv("FAIRGPU_URL");
    const char *et = getenv("FAIRGPU_TOKEN");
    if (eu && *eu) {
        cfg->url = fg_cli_normalize_url(eu);
        cfg->url_from_env = 1;
        free(furl);
    } else {
        cfg->url = fg_cli_normalize_url(furl ? furl : FG_DEFAULT_URL);
        free(furl);
    }
    const char *eca = getenv("FAIRGPU_CA_FILE");
    if (eca && *eca) {
        cfg->ca_file = fg_xstrdup(eca);
        free(fca);
    } else {
        cfg->ca_file = fca;
    }
    if (et && *et) {
        cfg->token = fg_xstrdup(et);
        cfg->token_from_env = 1;
        free(ftoken);
    } else {
        cfg->token = ftoken;
    }
    return rc;
}

/* mkdir -p for the directories above path, each mode 0700 when created. */
static int make_parents(const char *path)
{
    char *p = fg_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) < 0 && errno != EEXIST) {
            fprintf(stderr, "fairgpu: cannot create %s: %s\n", p, strerror(errno));
            free(p);
            return -1;
        }
        *s = '/';
    }
    free(p);
    return 0;
}

int fg_cli_config_save(const char *url, const char *token, const char *username)
{
    char *path = fg_cli_config_path();
    if (!path) {
        fprintf(stderr, "fairgpu: neither XDG_CONFIG_HOME nor HOME is set; cannot save the "
                        "login (use FAIRGPU_TOKEN instead)\n");
        return -1;
    }
    int rc = -1;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    json_t *o = json_object();
    /* keep the file's CA bundle setting (login rewrites the rest) */
    json_t *old = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    json_t *ca = json_object_get(old, "ca_file");
    if (json_is_string(ca))
        json_object_set(o, "ca_file", ca);
    json_decref(old);
    if (url)
        json_object_set_new(o, "url", json_string(url));
    if (token)
        json_object_set_new(o, "token", json_string(token));
    if (username)
        json_object_set_new(o, "username", json_string(username));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (make_parents(path) < 0)
        goto out;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "fairgpu: cannot write %s: %s\n", tmp, strerror(errno));
        goto out;
    }
    size_t len = strlen(text), off = 0;
    int ok = fchmod(fd, 0600) == 0;
    while (ok && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ok = 0;
        else
            off += (size_t)w;
    }
    ok = ok && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    if (close(fd) < 0)
        ok = 0;
    if (!ok || rename(tmp, path) < 0) {
        fprintf(stderr, "fairgpu: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(text);
    free(path);
    return rc;
}

void fg_cli_config_free(fg_cli_config_t *cfg)
{
    free(cfg->url);
    free(cfg->token);
    free(cfg->username);
    free(cfg->ca_file);
    memset(cfg, 0, sizeof *cfg);
}
