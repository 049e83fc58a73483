/* xml.h — walking an XML answer (EC2's, S3's) with libxml2: parse without
 * network access or error output, find elements by local name (so the
 * namespace and the order of siblings do not matter), read their text.
 * Built apart from drvcommon (drvxml): drover-agent does not load libxml2. */
#ifndef DRV_XML_H
#define DRV_XML_H

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

/* The document, or NULL when it does not parse or is longer than max bytes. */
xmlDoc *drv_xml_parse(const char *xml, size_t len, size_t max);
bool drv_xml_named(const xmlNode *n, const char *name);
/* The first child element of n (NULL is fine) called name, or NULL. */
const xmlNode *drv_xml_child(const xmlNode *n, const char *name);
/* Depth-first, from n and its following siblings: the first element called name. */
const xmlNode *drv_xml_find(const xmlNode *n, const char *name);
/* n's text into out ("" when n is NULL), truncated to len. */
void drv_xml_text(const xmlNode *n, char *out, size_t len);

#endif
