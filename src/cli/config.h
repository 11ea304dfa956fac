/*
 * config.h - where the CLI finds its server and token.
 *
 * The server URL is FAIRGPU_URL, else the config file's "url", else
 * http://127.0.0.1:8080. The token is FAIRGPU_TOKEN, else the config file's "token".
 * The CA bundle for https is --ca-file, else FAIRGPU_CA_FILE, else "ca_file".
 * The config file is $XDG_CONFIG_HOME/fairgpu/config.json (when XDG_CONFIG_HOME is an
 * absolute path), else $HOME/.config/fairgpu/config.json; `login` writes it with mode
 * 0600 (directory 0700), replacing it atomically.
 */
#ifndef FG_CLI_CONFIG_H
#define FG_CLI_CONFIG_H

#define FG_DEFAULT_URL "http://127.0.0.1:8080"

typedef struct {
    char *url;      /* no trailing '/'; owned */
    char *token;    /* NULL when none; owned */
    char *username; /* from the config file, for messages; may be NULL */
    char *ca_file;  /* CA bundle for an https server: FAIRGPU_CA_FILE, else the file's
                       "ca_file"; NULL: the system's store. Owned. */
    int url_from_env, token_from_env;
} fg_cli_config_t;

/* The config file's path (malloc'd), or NULL when neither XDG_CONFIG_HOME nor HOME is
 * set. */
char *fg_cli_config_path(void);

/* Loads env and file settings into cfg. Returns 0, or -1 (message on stderr) when the
 * file exists but cannot be read or is not valid JSON. */
int fg_cli_config_load(fg_cli_config_t *cfg);

/* Writes url, token (NULL: none) and username to the config file, keeping its
 * "ca_file". Returns 0, or -1 with a message on stderr. */
int fg_cli_config_save(const char *url, const char *token, const char *username);

void fg_cli_config_free(fg_cli_config_t *cfg);

/* Copies url without trailing slashes (malloc'd). */
char *fg_cli_normalize_url(const char *url);

#endif
